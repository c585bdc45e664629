package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On the stream routes the mux advertised "Allow: GET, HEAD, POST"
// (a 405 for PUT), but HEAD itself was refused by the SSE handler with
// "Allow: GET" — which left out POST. Both answers now give the methods the
// path really takes; HEAD elsewhere is untouched.
func TestStreamRoutesAllowWhatTheyServe(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	for _, tc := range []struct{ method, target, allow string }{
		{http.MethodHead, "/session/s1/events", "GET, POST"},
		{http.MethodPut, "/session/s1/events", "GET, POST"},
		{http.MethodDelete, "/session/s1/events", "GET, POST"},
		{http.MethodHead, "/session/s1/ws", "GET"},
		{http.MethodPost, "/session/s1/ws", "GET"},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "%s %s", tc.method, tc.target)
		assert.Equal(t, tc.allow, rec.Header().Get("Allow"), "%s %s", tc.method, tc.target)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/healthz", nil))
	assert.Equal(t, http.StatusOK, rec.Code, "HEAD of a plain GET route still works")
}
