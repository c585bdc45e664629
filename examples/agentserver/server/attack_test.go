package server

import (
	"bufio"
	"io"
	"net"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/internal/testkit"
)

// Every route that takes a body — publish, create, a message to the model,
// cancel, status, a Durable Streams create and append, a change of a
// many-session stream's set, the AI SDK chat and stop, AG-UI, A2A —
// answers a body
// that never finishes (announced and cut, or chunked and never ended) with
// its 408 within the body timeout, closes the connection, and leaves no
// goroutine behind.
func TestEveryBodyRouteAnswersABodyThatNeverEnds(t *testing.T) {
	const bodyTimeout = time.Second
	s := newServer(t, Options{BodyTimeout: bodyTimeout, WriteTimeout: bodyTimeout})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	put := func(target, ct, body string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "PUT "+target+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: "+ct+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
		require.NoError(t, err)
		line, _ := bufio.NewReader(c).ReadString('\n')
		require.Contains(t, line, " 201 ", target)
	}
	put("/v1/stream/d1", "text/plain", "")
	runtime.GC()
	base := runtime.NumGoroutine()

	const js = "Content-Type: application/json\r\n"
	routes(t, addr, bodyTimeout, js)
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= base+1 }, 10*time.Second, 50*time.Millisecond,
		"goroutines back to the baseline %d", base)
}

func routes(t *testing.T, addr string, bodyTimeout time.Duration, js string) {
	var wg sync.WaitGroup // all at once: t.Parallel would run GOMAXPROCS at a time
	for _, tc := range []struct{ method, target, headers string }{
		{"POST", "/session/s1/events", js},
		{"POST", "/sessions", js},
		{"POST", "/session/s1/messages", js},
		{"POST", "/session/s1/cancel", js},
		{"PUT", "/session/s1/status", js},
		{"PUT", "/v1/stream/d2", js},
		{"POST", "/v1/stream/d1", "Content-Type: text/plain\r\n"},
		{"POST", "/events/c1", js}, // read before the connection is looked up
		{"POST", ChatAPI, js},
		{"POST", ChatAPI + "/c1/stop", js},
		{"POST", AGUIPath, js},
		{"POST", A2APath, js},
	} {
		for _, framing := range []string{"Content-Length: 100\r\n", "Transfer-Encoding: chunked\r\n"} {
			name := tc.method + " " + tc.target + " " + strings.Fields(framing)[0]
			wg.Go(func() {
				status, answered, closed, err := partialBody(addr,
					tc.method+" "+tc.target+" HTTP/1.1\r\nHost: localhost\r\n"+tc.headers+framing+"\r\n", framing)
				assert.NoError(t, err, "%s: an answer while the body is missing", name)
				assert.Contains(t, status, " 408 ", name)
				assert.Less(t, answered, bodyTimeout+2*time.Second, "%s: answered within the body timeout", name)
				assert.Less(t, closed, bodyTimeout+3*time.Second, "%s: closed", name)
			})
		}
	}
	wg.Wait()
}

// partialBody sends head, the first bytes of a body and never the rest;
// it returns the status line and how long the answer and the close took.
func partialBody(addr, head, framing string) (status string, answered, closed time.Duration, err error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", 0, 0, err
	}
	defer c.Close()
	start := time.Now()
	part := `{"te`
	if strings.HasPrefix(framing, "Transfer-Encoding") {
		part = "4\r\n" + part + "\r\n"
	}
	if _, err = io.WriteString(c, head+part); err != nil {
		return "", 0, 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	if status, err = br.ReadString('\n'); err != nil {
		return "", 0, 0, err
	}
	answered = time.Since(start)
	_, _ = io.Copy(io.Discard, br)
	return strings.TrimSpace(status), answered, time.Since(start), nil
}

// Clients that never read their stream — SSE, WebSocket, a Durable
// Streams SSE read, each on a small receive buffer while a publisher fills
// the session — are cut off once a write waits past the stream's write
// timeout; their subscriptions end and the goroutines return to the
// baseline.
func TestStreamsNobodyReadsAreCutOffAndLeakNothing(t *testing.T) {
	const wt = 300 * time.Millisecond
	s := newServer(t, Options{SSE: sse.HandlerOptions{WriteTimeout: wt}, WS: ws.HandlerOptions{WriteTimeout: wt},
		Durable: durable.HandlerOptions{WriteTimeout: wt}})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewUnstartedServer(s)
	ts.Config.ConnContext = sse.LimitSendBuffer(4096)
	ts.Start()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	runtime.GC()
	base := runtime.NumGoroutine()

	var conns []net.Conn
	for _, req := range []string{
		"GET /session/s1/events HTTP/1.1\r\nHost: localhost\r\n\r\n",
		"GET /session/s1/ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		"GET /v1/stream/s1?offset=-1&live=sse HTTP/1.1\r\nHost: localhost\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
		_, err = io.WriteString(c, req)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(s.Bus())["s1"] == 3 }, 10*time.Second, 10*time.Millisecond)
	payload := map[string]string{"text": strings.Repeat("x", 2000)}
	require.Eventually(t, func() bool {
		_, err := s.Bus().Publish("s1", "note", payload)
		require.NoError(t, err)
		return testkit.SubscriberCounts(s.Bus())["s1"] == 0
	}, 20*time.Second, time.Millisecond, "the streams nobody reads are cut off")
	for _, c := range conns {
		_ = c.Close()
	}
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= base+1 }, 10*time.Second, 50*time.Millisecond,
		"goroutines back to the baseline %d", base)
}
