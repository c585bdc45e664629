package ws_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

const waitFor = 10 * time.Second

// server is a bus with the WebSocket handler mounted on an httptest server.
type server struct {
	bus *eventbus.Bus
	h   *ws.Handler
	ts  *httptest.Server
}

func newServer(t testing.TB, cfg eventbus.Options, o ws.HandlerOptions) *server {
	t.Helper()
	s, _ := newCutServer(t, cfg, o)
	return s
}

// cutListener records every accepted connection so a test can cut them
// all (hijacked connections are out of httptest's reach).
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	// small makes every accepted socket's send buffer 4 KiB, so that a
	// peer that stops reading blocks the server's writes at once.
	small bool
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		small := l.small
		l.mu.Unlock()
		if tc, ok := c.(*net.TCPConn); ok && small {
			_ = tc.SetWriteBuffer(4096)
		}
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// Cut closes every connection accepted so far: a server-side drop.
func (l *cutListener) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func newCutServer(t testing.TB, cfg eventbus.Options, o ws.HandlerOptions) (*server, *cutListener) {
	t.Helper()
	bus, err := eventbus.New(cfg)
	require.NoError(t, err)
	h, err := ws.NewHandler(bus, o)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(ws.Pattern, h)
	ts := httptest.NewUnstartedServer(mux)
	cl := &cutListener{Listener: ts.Listener}
	ts.Listener = cl
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, h.Shutdown(ctx))
		ts.Close()
		_ = bus.Close()
	})
	return &server{bus: bus, h: h, ts: ts}, cl
}

// url returns the ws:// URL of session id with query q ("" for none).
func (s *server) url(id, q string) string {
	u := "ws" + strings.TrimPrefix(s.ts.URL, "http") + "/session/" + id + "/ws"
	if q != "" {
		u += "?" + q
	}
	return u
}

// dial opens a raw connection (no resume message sent).
func dial(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// send writes one text message.
func send(t testing.TB, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(msg)))
}

// read reads one frame and decodes it.
func read(t testing.TB, c *websocket.Conn) eventbus.Event {
	t.Helper()
	ev, _ := readEpoch(t, c)
	return ev
}

func readEpoch(t testing.TB, c *websocket.Conn) (eventbus.Event, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	typ, b, err := c.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	ev, epoch, err := ws.DecodeFrame(b)
	require.NoError(t, err, "frame %s", b)
	return ev, epoch
}

// readClose reads until the connection ends and returns the close error.
func readClose(t testing.TB, c *websocket.Conn) (websocket.CloseError, []eventbus.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var evs []eventbus.Event
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			require.ErrorAs(t, err, &ce, "want a close frame, got %v", err)
			return ce, evs
		}
		ev, _, derr := ws.DecodeFrame(b)
		require.NoError(t, derr)
		evs = append(evs, ev)
	}
}

func publish(t testing.TB, b *eventbus.Bus, session string, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for i := range n {
		ev, err := b.Publish(session, "msg", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	return ids
}

// smallRcvBuf is a net.Dialer whose sockets have a 4 KiB receive buffer.
func smallRcvBuf() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// dialRaw opens a raw TCP socket (4 KiB receive buffer), writes a WebSocket
// handshake by hand, reads the 101 answer, and returns the socket: a client
// that then never reads a byte.
func dialRaw(t testing.TB, rawURL string) net.Conn {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	c, err := smallRcvBuf().Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return c
}

// dialSmall dials with a 4 KiB receive buffer: a client that stops reading
// stalls the server's writes after a few frames.
func dialSmall(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: smallRcvBuf().DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.CloseNow()
		hc.CloseIdleConnections()
	})
	return c
}
