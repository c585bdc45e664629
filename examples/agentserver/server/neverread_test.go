package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
)

// TestClientThatNeverReadsIsCutOff: a client that pipelines requests and
// never reads the answers pinned its connection and a server goroutine for
// good (seen live: Send-Q 190 KB, still there after 25 s), because only the
// streams bounded their writes. Options.WriteTimeout now bounds every
// answer — a static file, a JSON answer, a stream's refusal — and the
// connection is closed when it passes.
func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, request string
		n             int
	}{
		{"static file", "GET /static/app.js HTTP/1.1\r\nHost: x\r\n\r\n", 200},
		{"stream refusal", "GET /session/s1/events?scope=galaxy HTTP/1.1\r\nHost: x\r\n\r\n", 5000},
		{"JSON answer", "GET /info HTTP/1.1\r\nHost: x\r\n\r\n", 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, Options{WriteTimeout: 300 * time.Millisecond})
			require.NoError(t, s.Bus().CreateSession("s1", ""))
			closed := make(chan struct{})
			var once sync.Once
			ts := httptest.NewUnstartedServer(s)
			ts.Config.ConnContext = sse.LimitSendBuffer(sse.DefaultSendBuffer) // as main does
			ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateClosed {
					once.Do(func() { close(closed) })
				}
			}
			ts.Start()
			t.Cleanup(ts.Close)

			c, err := net.Dial("tcp", ts.Listener.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, strings.NewReader(strings.Repeat(tc.request, tc.n))) // stops when the server closes
			}()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server still holds the connection of a client that does not read")
			}
			got, _ := io.ReadAll(c) // what was sent before the cut, then EOF or a reset
			wg.Wait()
			answered := bytes.Count(got, []byte("HTTP/1.1 "))
			assert.Positive(t, answered, "answers were written until the client stopped taking them")
			assert.Less(t, answered, tc.n, "the connection was cut before every answer was written")
		})
	}
}

// TestStreamsOutliveTheWriteTimeout: the write deadline that
// Options.WriteTimeout sets on each request must not cut a stream — one
// that follows a short request on the same kept-alive connection, one
// whose handler has no write timeout of its own, or a WebSocket whose
// hijacked socket inherited the deadline of its upgrade.
func TestStreamsOutliveTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const wt = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"handlers bound their writes", Options{WriteTimeout: wt}},
		{"handlers set no write timeout", Options{WriteTimeout: wt, SSE: sse.HandlerOptions{WriteTimeout: -1}, WS: ws.HandlerOptions{WriteTimeout: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, tc.o)
			require.NoError(t, s.Bus().CreateSession("s1", ""))
			ts := httptest.NewServer(s)
			t.Cleanup(ts.Close)
			t.Cleanup(func() { _ = s.Close() })

			// SSE after a short answer on the same connection.
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			resp, err := client.Get(ts.URL + "/healthz")
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/session/s1/events?replay=0", nil)
			require.NoError(t, err)
			var reused bool
			req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
			resp, err = client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.True(t, reused, "the stream runs on the connection of the short answer")
			dec := sse.NewDecoder(resp.Body)

			wsc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/session/s1/ws?replay=0", nil)
			require.NoError(t, err)
			defer wsc.CloseNow()

			// Both streams stay quiet for several write timeouts (the
			// deadline of the short answer and of the upgrade pass), then
			// an event must still reach both. The quiet time is the
			// behaviour under test: a socket's write deadline is wall-clock
			// (no synctest bubble holds a real connection), and nothing
			// happens when it passes that the test could wait for instead.
			time.Sleep(3 * wt)
			_, err = s.Bus().Publish("s1", "note", map[string]int{"n": 1})
			require.NoError(t, err)
			for {
				ev, err := dec.Next()
				require.NoError(t, err, "the SSE stream was cut")
				if ev.Event == "note" {
					break
				}
			}
			for {
				_, b, err := wsc.Read(ctx)
				require.NoError(t, err, "the WebSocket was cut")
				if strings.Contains(string(b), `"type":"note"`) {
					break
				}
			}
		})
	}
}
