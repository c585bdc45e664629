package sse_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// rawGet sends a GET for path on a new TCP connection to srv's address and
// returns the connection and a reader positioned after the answer's head,
// with the head's lines.
func rawGet(t *testing.T, addr, path string, hdr ...string) (net.Conn, *bufio.Reader, []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	_, err = io.WriteString(c, req+"\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	var head []string
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return c, br, head
		}
		head = append(head, line)
	}
}

// readIDLines reads frames from br until n ids arrived.
func readIDLines(t *testing.T, br *bufio.Reader, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "after %v", got)
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "id: "); ok {
			got = append(got, v)
		}
	}
	return got
}

// TestHijackedStreamServesOnItsConnection: with Hijack, an HTTP/1.1 stream
// is answered on the connection itself: 200, the stream's headers, those a
// middleware set, Connection: close and no Transfer-Encoding (the body ends
// with the connection); live events arrive, a client that goes ends its
// subscription at once (no heartbeat or event needed to notice), and a
// resume from its last id gets exactly the rest.
func TestHijackedStreamServesOnItsConnection(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Hijack: true, PlainIDs: true})
	srv := serve(t, h, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Middleware", "kept")
			next.ServeHTTP(w, r)
		})
	})
	addr := srv.Listener.Addr().String()

	c, br, head := rawGet(t, addr, "/session/s1/events?replay=0")
	require.NotEmpty(t, head)
	assert.Equal(t, "HTTP/1.1 200 OK", head[0])
	headers := strings.Join(head[1:], "\n")
	for _, want := range []string{"Content-Type: text/event-stream", "Cache-Control: no-cache, no-transform", "Connection: close", "X-Middleware: kept", "X-Event-Epoch: " + b.Epoch()} {
		assert.Contains(t, headers, want)
	}
	assert.NotContains(t, headers, "Transfer-Encoding")
	assert.NotContains(t, headers, "Content-Length")
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	for i := range 3 {
		publish(t, b, "s1", "tick", i)
	}
	got := readIDLines(t, br, 4) // stream_start's id, then 1, 2, 3
	assert.Equal(t, []string{"0", "1", "2", "3"}, got)

	require.NoError(t, c.Close())
	waitIdle(t, h, b) // the client went: its subscription ends without a write

	for i := 3; i < 6; i++ {
		publish(t, b, "s1", "tick", i)
	}
	_, br, _ = rawGet(t, addr, "/session/s1/events", "Last-Event-ID", "3")
	assert.Equal(t, []string{"4", "5", "6"}, readIDLines(t, br, 3))
}

// TestHijackLeavesEncodedAnswersOnNetHTTP: a middleware that set a
// Content-Encoding encodes the body in its writer; taking the connection
// over would send raw frames under that header, so the stream stays on
// net/http (chunked, no Connection: close).
func TestHijackLeavesEncodedAnswersOnNetHTTP(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Hijack: true})
	srv := serve(t, h, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip") // a compressor that forwards Hijack
			next.ServeHTTP(w, r)
		})
	})
	_, _, head := rawGet(t, srv.Listener.Addr().String(), "/session/s1/events?replay=0")
	require.NotEmpty(t, head)
	headers := strings.Join(head[1:], "\n")
	assert.Contains(t, headers, "Transfer-Encoding: chunked")
	assert.NotContains(t, headers, "Connection: close")
}

// TestHijackedStreamsEndOnShutdown: http.Server does not see a hijacked
// stream; Handler.Shutdown ends every one (the client reads the end of
// its body) and waits for them.
func TestHijackedStreamsEndOnShutdown(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Hijack: true})
	srv := serve(t, h, nil)
	var readers []*bufio.Reader
	for range 5 {
		_, br, head := rawGet(t, srv.Listener.Addr().String(), "/session/s1/events")
		require.Equal(t, "HTTP/1.1 200 OK", head[0])
		readers = append(readers, br)
	}
	require.Eventually(t, func() bool { return h.Stats().Active == 5 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.Shutdown(ctx))
	for _, br := range readers {
		_, err := io.ReadAll(br)
		assert.NoError(t, err, "the body ends with the connection")
	}
	waitIdle(t, h, b)
}

// TestHijackKeepsOtherWritersOnNetHTTP: a ResponseWriter that cannot be
// hijacked (here a recorder) serves the stream as without Hijack.
func TestHijackKeepsOtherWritersOnNetHTTP(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{Hijack: true})
	r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
	r.SetPathValue("id", "s1")
	w := serveUntilID(t, h, r, 1)
	assert.Equal(t, http.StatusOK, w.code())
	assert.Equal(t, []uint64{1}, ids(frames(t, w.body())))
}
