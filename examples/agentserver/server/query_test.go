package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAPIRoutesRefuseUnknownQueryParameters: DELETE /session/{id}?cascde=1
// closed only the session and said nothing, and a query on a POST was
// ignored. The example's own API routes now refuse a parameter they do not
// take, naming it; the GET routes still ignore them (a cache-buster).
func TestAPIRoutesRefuseUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("root", ""))
	require.NoError(t, s.Bus().CreateSession("child", "root"))

	for _, tc := range []struct{ method, target, body, bad string }{
		{"DELETE", "/session/root?cascde=1", "", "cascde"},
		{"DELETE", "/session/root?Cascade=1", "", "Cascade"},
		{"DELETE", "/session/root?cascade=1&recursive=1", "", "recursive"},
		{"POST", "/session/root/events?lastEventId=3", `{"type":"x"}`, "lastEventId"},
		{"POST", "/sessions?id=fromquery", `{"id":"q1"}`, "id"},
	} {
		status, _, body := do(t, s, tc.method, tc.target, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s %s", tc.method, tc.target)
		assert.Equal(t, "invalid_argument", body["code"])
		assert.Contains(t, body["message"], `"`+tc.bad+`"`, "names the parameter")
	}
	assert.True(t, s.Bus().SessionExists("root"), "nothing was closed")
	assert.True(t, s.Bus().SessionExists("child"))
	assert.Zero(t, s.Bus().LastEventID(), "nothing was published")
	assert.False(t, s.Bus().SessionExists("q1"), "nothing was created")

	status, _, _ := do(t, s, "GET", "/info?_=1712345678901", "")
	assert.Equal(t, http.StatusOK, status, "GET routes ignore a cache-buster")
	status, _, _ = do(t, s, "DELETE", "/session/root?cascade=1", "")
	assert.Equal(t, http.StatusNoContent, status)
	assert.False(t, s.Bus().SessionExists("child"), "cascade=1 closes the tree")
}
