package sse_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// countingWriter counts the bytes the socket accepted for one response.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// pinnedByStuckClient serves one stream to a client that never reads (its
// own receive buffer held at 16 KiB) and returns how many bytes the
// server's socket accepted before the write deadline ended the stream:
// what the kernel holds for the stuck client beyond the bus's own queue.
func pinnedByStuckClient(t *testing.T, connContext func(context.Context, net.Conn) context.Context) int64 {
	t.Helper()
	b := newBus(t, eventbus.Options{MaxQueueSize: 100_000, MaxQueuedBytes: 1 << 30})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{WriteTimeout: 300 * time.Millisecond, Heartbeat: -1, Retry: -1})
	var written atomic.Int64
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(countingWriter{w, &written}, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnContext = connContext
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /session/s1/events?replay=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	payload := strings.Repeat("x", 32<<10)
	// Publish until the stream hits its write deadline (checked every 2 ms).
	require.Eventually(t, func() bool {
		for range 8 {
			_, err := b.Publish("s1", "big", payload)
			assert.NoError(t, err)
		}
		return h.Stats().WriteErrors > 0
	}, 20*time.Second, 2*time.Millisecond, "the stream never hit its write deadline")
	waitIdle(t, h, b)
	return written.Load()
}

// Issue 12.10: 55 stuck clients held 212 MiB of kernel TCP memory while RSS
// grew 18 MiB: Linux auto-tunes each send buffer up to tcp_wmem's maximum
// (4 MiB). LimitSendBuffer caps what a stuck client can pin in the kernel;
// the write deadline then cuts it off.
func TestStuckClientPinsBoundedSocketMemory(t *testing.T) {
	t.Parallel()
	const limit = sse.DefaultSendBuffer
	pinned := pinnedByStuckClient(t, sse.LimitSendBuffer(limit))
	// Linux doubles SO_SNDBUF; add the client's 16 KiB receive buffer (x2),
	// net/http's 4 KiB bufio.Writer, chunk headers and one partly written frame.
	assert.Less(t, pinned, int64(2*limit+2*(16<<10)+(64<<10)+(32<<10)),
		"a stuck client pinned %d KiB", pinned>>10)
	t.Logf("with LimitSendBuffer(DefaultSendBuffer = %d KiB): %d KiB accepted by the socket before the stream was cut", limit>>10, pinned>>10)
	if testing.Verbose() {
		t.Logf("without: %d KiB", pinnedByStuckClient(t, nil)>>10)
	}
}

func TestLimitSendBufferLeavesOtherConnsAlone(t *testing.T) {
	t.Parallel()
	f := sse.LimitSendBuffer(sse.DefaultSendBuffer)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	assert.Equal(t, ctx, f(ctx, a), "ctx passes through; a pipe is not TCP")
	assert.Equal(t, ctx, sse.LimitSendBuffer(0)(ctx, a))
}

// A many-sessions stream (GET /events?session=a&session=b) whose client
// connects and never reads is cut off by the write deadline once its
// socket is full, not held by a queue that grows: its subscription ends
// (by the deadline, not by a queue eviction), the handler returns, and
// with the client's socket closed the goroutines are back at the
// baseline. Not parallel: it counts the process's goroutines.
func TestManySessionsStreamFreesAClientThatNeverReads(t *testing.T) {
	base := goleak.IgnoreCurrent()
	func() {
		b, err := eventbus.New(eventbus.Options{MaxQueueSize: 100_000, MaxQueuedBytes: 1 << 30})
		require.NoError(t, err)
		defer b.Close()
		for _, s := range []string{"a", "b"} {
			require.NoError(t, b.CreateSession(s, ""))
		}
		h, err := sse.NewHandler(b, sse.HandlerOptions{WriteTimeout: 200 * time.Millisecond, Heartbeat: -1})
		require.NoError(t, err)
		defer h.Close()
		mux := http.NewServeMux()
		mux.Handle(sse.ManyPattern, h)
		srv := httptest.NewUnstartedServer(mux)
		srv.Config.ConnContext = sse.LimitSendBuffer(sse.DefaultSendBuffer)
		srv.Start()
		defer srv.Close()
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
			if err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /events?session=a&session=b HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)
		payload := strings.Repeat("x", 32<<10)
		n := 0
		require.Eventually(t, func() bool {
			for i := range 8 {
				_, err := b.Publish([]string{"a", "b"}[i%2], "big", payload)
				require.NoError(t, err)
				n++
			}
			return h.Stats().WriteErrors > 0
		}, 20*time.Second, 2*time.Millisecond, "the stream never hit its write deadline")
		waitIdle(t, h, b)
		assert.Zero(t, b.Stats().Evicted, "cut by the write deadline, not by a queue eviction")
		t.Logf("cut after %d events of 32 KiB", n)
		c.Close()
	}()
	goleak.VerifyNone(t, base)
}

// POST /events/{conn} with a body that never finishes, on a plain
// http.Server with no timeouts of its own, is answered 408 once the
// handler's BodyTimeout has passed, with Connection: close, and pins no
// goroutine. Not parallel: it counts the process's goroutines.
func TestManyChangeBodyThatNeverFinishesIs408(t *testing.T) {
	base := goleak.IgnoreCurrent()
	func() {
		b, err := eventbus.New(eventbus.Options{})
		require.NoError(t, err)
		defer b.Close()
		h, err := sse.NewHandler(b, sse.HandlerOptions{BodyTimeout: 200 * time.Millisecond})
		require.NoError(t, err)
		defer h.Close()
		mux := http.NewServeMux()
		mux.Handle(sse.ChangePattern, h)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST /events/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"add\"")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		got, _ := io.ReadAll(c) // the server closes it after the answer
		assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 408 "), "%s", got)
		assert.Contains(t, string(got), "request_timeout")
		assert.Contains(t, string(got), "Connection: close")
	}()
	goleak.VerifyNone(t, base)
}
