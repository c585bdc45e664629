package aisdk_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// dialStuck opens a TCP connection whose receive buffer is held at
// 16 KiB, for a client that sends a request and never reads.
func dialStuck(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	return c
}

// A client of each frontend stream that connects and never reads is cut
// off by the handler's write deadline once the socket is full: its
// subscription is closed (nothing queues for it past that), the handler
// returns, and once the client's socket is closed the goroutines are back
// at the baseline. Not parallel: it counts the process's goroutines.
func TestFrontendStreamsFreeAClientThatNeverReads(t *testing.T) {
	rows := []struct {
		name, request string
		// get: the stream is a resume of a turn the test starts
		get bool
	}{
		{"aisdk POST", "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" + chatBody("s1", "hi"), false},
		{"aisdk GET resume", "GET /api/chat/s1/stream HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"agui POST", "POST /agui HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" + `{"threadId":"s1","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}`, false},
		{"agui join", "GET /agui/s1/stream HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"a2a stream", "POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"contextId":"s1"}}}`, false},
	}
	base := goleak.IgnoreCurrent()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			bus, err := eventbus.New(eventbus.Options{})
			require.NoError(t, err)
			defer bus.Close()
			turns := make(chan *eventbus.Turn, 1)
			start := func(session, id string) (string, error) {
				tn, err := bus.StartTurn(context.Background(), session, eventbus.TurnOptions{ID: id})
				if err != nil {
					return "", err
				}
				turns <- tn
				return tn.ID(), nil
			}
			const wt = 200 * time.Millisecond
			ai, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{WriteTimeout: wt,
				Start: func(_ *http.Request, m aisdk.Message) (string, error) { return start(m.Chat, "") }})
			require.NoError(t, err)
			ag, err := agui.NewHandler(bus, agui.HandlerOptions{WriteTimeout: wt,
				Start: func(_ *http.Request, in agui.Input) (string, error) { return start(in.Thread, in.Run) }})
			require.NoError(t, err)
			aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{WriteTimeout: wt,
				Start: func(_ *http.Request, m a2a.Message) (string, error) { return start(m.Context, m.Turn) }})
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("/api/chat", ai)
			mux.Handle("/api/chat/", ai)
			mux.Handle("/agui", ag)
			mux.Handle("/agui/", ag)
			mux.Handle("/a2a", aa)
			ts := httptest.NewUnstartedServer(mux)
			ts.Config.ConnContext = sse.LimitSendBuffer(sse.DefaultSendBuffer) // as a deployment should
			ts.Start()
			defer ts.Close()
			if r.get {
				require.NoError(t, bus.CreateSession("s1", ""))
				_, err := start("s1", "t1")
				require.NoError(t, err)
			}
			req := r.request
			if head, body, ok := strings.Cut(req, "\r\n\r\n"); ok && strings.Contains(head, "%d") {
				req = strings.Replace(head, "%d", itoa(len(body)), 1) + "\r\n\r\n" + body
			}
			c := dialStuck(t, ts.Listener.Addr().String())
			defer c.Close()
			_, err = io.WriteString(c, req)
			require.NoError(t, err)
			tn := <-turns
			require.Eventually(t, func() bool { return testkit.SubscriberCounts(bus)["s1"] == 1 }, 5*time.Second, time.Millisecond)
			payload := strings.Repeat("x", 32<<10)
			n := 0
			require.Eventually(t, func() bool {
				for range 8 {
					u := acp.Notification{SessionID: "s1", Update: acp.MessageChunk(payload)}
					_, err := tn.Publish(u.Type(), u)
					require.NoError(t, err)
					n++
				}
				return testkit.SubscriberCounts(bus)["s1"] == 0
			}, 20*time.Second, 2*time.Millisecond, "the stuck client's stream was never cut")
			t.Logf("cut after %d deltas of 32 KiB (%d MiB); evicted by the queue: %d", n, n/32, bus.Stats().Evicted)
			_, _ = tn.End(nil)
			c.Close()
		})
	}
	goleak.VerifyNone(t, base)
}

func itoa(n int) string { return strconv.Itoa(n) }
