package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The example server speaks HTTP/2 without TLS (h2c, prior knowledge: curl
// --http2-prior-knowledge, Go's Protocols.SetUnencryptedHTTP2) as well as
// HTTP/1.1. Before, an h2c client's preface was read as an HTTP/1 request:
// the loopback check answered it 421 "Host \"\" is not a loopback name" in
// HTTP/1, which the client could not read ("frame too large"). Over h2c the
// JSON routes answer, an SSE stream flows, and a WebSocket handshake is 426
// upgrade_required (RFC 8441 is not supported), as over HTTP/2 with TLS
// (server.TestHTTP2Edges, which also bounds a body that never finishes).
func TestH2CIsServed(t *testing.T) {
	base, _, stop := startRun(t)
	defer stop()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	resp, err := client.Get(base + "/healthz")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, [2]any{"HTTP/2.0", 200}, [2]any{resp.Proto, resp.StatusCode})

	post := func(path, body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, post("/sessions", `{"id":"h2"}`))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/session/h2/events", nil)
	require.NoError(t, err)
	sse, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer sse.Body.Close()
	require.Equal(t, [2]any{"HTTP/2.0", 200}, [2]any{sse.Proto, sse.StatusCode})
	require.Equal(t, http.StatusAccepted, post("/session/h2/events", `{"type":"note","data":{"text":"over h2c"}}`))
	sc := bufio.NewScanner(sse.Body)
	found := false
	for !found && sc.Scan() {
		found = strings.Contains(sc.Text(), "over h2c")
	}
	assert.True(t, found, "the event arrives on the SSE stream over h2c")

	req, err = http.NewRequest(http.MethodGet, base+"/session/h2/ws", nil)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	var e struct{ Code string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	_ = resp.Body.Close()
	assert.Equal(t, [2]any{http.StatusUpgradeRequired, "upgrade_required"}, [2]any{resp.StatusCode, e.Code})
}
