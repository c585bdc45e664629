package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAPIRoutesRefuseUnknownQueryParameters: DELETE /session/{id}?cascde=1
// closed only the session and said nothing, and a query on a POST was
// ignored. The example's own API routes now refuse a parameter they do not
// take, naming it, with the stream routes' code for that cause
// (unknown_query_parameter; it was invalid_argument, issue 27.5); the GET
// routes still ignore them (a cache-buster).
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
		assert.Equal(t, "unknown_query_parameter", body["code"])
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

// Issue 27.5: one cause, one code. A misspelt parameter is
// unknown_query_parameter on the stream routes and on the API's own; a
// query that does not parse, or repeats a parameter, is invalid_query on
// both.
func TestQueryErrorsAreOneCodePerCause(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	for _, tc := range []struct{ method, target, body, code string }{
		{"GET", "/session/s1/events?lastEventID=3", "", "unknown_query_parameter"},
		{"GET", "/session/s1/ws?lastEventID=3", "", "unknown_query_parameter"},
		{"POST", "/sessions?lastEventID=3", `{"id":"q"}`, "unknown_query_parameter"},
		{"POST", "/session/s1/events?lastEventID=3", `{"type":"x"}`, "unknown_query_parameter"},
		{"DELETE", "/session/s1?lastEventID=3", "", "unknown_query_parameter"},
		{"GET", "/session/s1/events?scope=%zz", "", "invalid_query"},
		{"POST", "/sessions?a=%zz", `{"id":"q"}`, "invalid_query"},
		{"DELETE", "/session/s1?cascade=%zz", "", "invalid_query"},
		{"GET", "/session/s1/events?scope=session&scope=all", "", "invalid_query"},
		{"DELETE", "/session/s1?cascade=0&cascade=1", "", "invalid_query"},
	} {
		status, _, body := do(t, s, tc.method, tc.target, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s %s", tc.method, tc.target)
		assert.Equal(t, tc.code, body["code"], "%s %s: %v", tc.method, tc.target, body["message"])
	}
	assert.True(t, s.Bus().SessionExists("s1"), "nothing was closed")
}

// Issue 27.5: GET /info had no Durable Streams counters beside the bus's,
// SSE's and WebSocket's.
func TestInfoCarriesDurableStreamsCounters(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	status, _, _ := do(t, s, "PUT", "/v1/stream/d1", "")
	require.Equal(t, http.StatusCreated, status)
	status, _, _ = do(t, s, "GET", "/v1/stream/nope?offset=-1", "")
	require.Equal(t, http.StatusNotFound, status)
	status, _, info := do(t, s, "GET", "/info", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, info, "durable")
	d, _ := info["durable"].(map[string]any)
	assert.EqualValues(t, 1, d["streams"], "the Durable Streams handler's own counters (durable.Handler.Stats)")
	assert.EqualValues(t, 1, d["started"])
	assert.EqualValues(t, 1, d["rejected"])
}

// Issue 27.5: -h did not list the WebSocket and Durable Streams routes.
// Every route the server mounts is in Routes (which -h prints).
func TestRoutesListEveryMountedRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	var listed []string
	for _, r := range Routes() {
		listed = append(listed, r.Pattern)
		assert.NotEmpty(t, r.Request)
		assert.NotEmpty(t, r.Doc)
	}
	assert.ElementsMatch(t, s.patterns, listed)
}

// The example's own answers are written as the handlers' are: a name
// holding '&', '<' or '>' reads as sent, not as \u0026, \u003c, \u003e.
func TestAPIErrorBodiesDoNotEscapeHTML(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("root", ""))
	req := httptest.NewRequest("DELETE", "/session/root?a%26b%3Cc%3E=1", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), `a&b<c>`)
	for _, esc := range []string{`\u0026`, `\u003c`, `\u003e`} {
		assert.NotContains(t, rec.Body.String(), esc)
	}
}
