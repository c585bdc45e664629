package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
)

// TestReadBodiesKeepTheConnection: boundBody answers Connection: close
// until the body has been read, and only readBody (the JSON routes) took
// it back, so every Durable Streams append (PUT, POST: the durable handler
// reads its body itself) closed its keep-alive connection, even a 204. A
// route that has read its whole body now keeps the connection, whoever
// read it; a refusal before the body is read still closes it, gracefully.
func TestReadBodiesKeepTheConnection(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{Durable: durable.HandlerOptions{MaxBodyBytes: 64 << 10}})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	blob := bytes.Repeat([]byte{0, 1, 0xff, '\n'}, 1000)
	send := func(method, path, ctype string, body []byte) (*http.Response, bool) {
		t.Helper()
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), method, ts.URL+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", ctype)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp, reused
	}
	prevKept := false
	for i, tc := range []struct {
		method, path, ctype string
		body                []byte
		status              int
		keep                bool
	}{
		{http.MethodPost, "/session/s1/events", "application/json", []byte(`{"type":"note"}`), http.StatusAccepted, true},
		{http.MethodPut, "/v1/stream/blob", "application/octet-stream", blob, http.StatusCreated, true},
		{http.MethodPost, "/v1/stream/blob", "application/octet-stream", blob, http.StatusNoContent, true},
		{http.MethodPost, "/v1/stream/blob", "application/octet-stream", blob[:3], http.StatusNoContent, true},
		{http.MethodPost, "/session/s1/events", "text/plain", []byte(`{"type":"note"}`), http.StatusUnsupportedMediaType, false}, // refused unread
		{http.MethodPost, "/v1/stream/blob", "application/octet-stream", blob[:3], http.StatusNoContent, true},
		// Refused unread on a kept connection: net/http must still close
		// it gracefully (half-close, then wait), or the client, still
		// sending, gets a reset instead of the 413 (the Durable Streams
		// conformance case "should handle large payload appropriately").
		{http.MethodPost, "/v1/stream/blob", "application/octet-stream", make([]byte, 8<<20), http.StatusRequestEntityTooLarge, false},
	} {
		resp, reused := send(tc.method, tc.path, tc.ctype, tc.body)
		require.Equal(t, tc.status, resp.StatusCode, "%d: %s %s", i, tc.method, tc.path)
		assert.Equal(t, !tc.keep, resp.Close, "%d: %s %s %s: Connection: close", i, tc.method, tc.path, tc.ctype)
		if prevKept {
			assert.True(t, reused, "%d: %s %s: the previous request's connection was kept", i, tc.method, tc.path)
		}
		prevKept = tc.keep
	}
}
