package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTP2Edges: the edges over TLS + HTTP/2, as a browser or curl --http2
// reaches a server behind TLS. A POST body that never finishes is answered
// 408 within BodyTimeout and costs only its stream (the connection serves
// the next request); a WebSocket handshake over HTTP/2 is 426
// upgrade_required as JSON (RFC 8441 is not supported, and no Upgrade header
// is sent, which HTTP/2 forbids); a compressed body is 415; an SSE stream
// flows.
func TestHTTP2Edges(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{BodyTimeout: 300 * time.Millisecond})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewUnstartedServer(s)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = s.Close() })
	client := ts.Client()
	client.Transport.(*http.Transport).ForceAttemptHTTP2 = true

	decode := func(resp *http.Response) map[string]any {
		t.Helper()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}

	// A body that never finishes: the pipe is never closed.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() { _, _ = pw.Write([]byte(`{"type":`)) }()
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/session/s1/events", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, "request_timeout", decode(resp)["code"])
	_ = resp.Body.Close()
	assert.Less(t, time.Since(start), 5*time.Second, "answered within the body timeout, not when the client gives up")

	// The same connection serves the next request.
	resp, err = client.Get(ts.URL + "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_ = resp.Body.Close()

	// WebSocket over HTTP/2.
	req, err = http.NewRequest(http.MethodGet, ts.URL+"/session/s1/ws", nil)
	require.NoError(t, err)
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err = client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
	body := decode(resp)
	_ = resp.Body.Close()
	assert.Equal(t, "upgrade_required", body["code"])
	assert.Contains(t, body["message"], "HTTP/2")
	assert.Empty(t, resp.Header.Get("Upgrade"))
	assert.Zero(t, s.Bus().Stats().Subscribers)

	// A compressed body.
	req, err = http.NewRequest(http.MethodPost, ts.URL+"/session/s1/events", bytes.NewReader([]byte{0x1f, 0x8b, 0}))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err = client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	assert.Equal(t, "unsupported_content_encoding", decode(resp)["code"])
	_ = resp.Body.Close()

	// An SSE stream.
	_, err = s.Bus().Publish("s1", "note", map[string]int{"n": 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/session/s1/events?lastEventId=0", nil)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	var got strings.Builder
	buf := make([]byte, 512)
	for !strings.Contains(got.String(), `"type":"note"`) {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		require.NoError(t, err, "read so far: %q", got.String())
	}
	assert.Contains(t, got.String(), "id: ")
}
