package aisdk_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/eventbus"
)

// frontendMux mounts the three frontend handlers, with o's body timeout,
// on one mux; Start is never reached by the tests that use it.
func frontendMux(t *testing.T, bus *eventbus.Bus, bt time.Duration) *http.ServeMux {
	t.Helper()
	refuse := func() (string, error) { return "", eventbus.ErrTurnActive }
	ai, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, aisdk.Message) (string, error) { return refuse() }})
	require.NoError(t, err)
	ag, err := agui.NewHandler(bus, agui.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, agui.Input) (string, error) { return refuse() }})
	require.NoError(t, err)
	aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, a2a.Message) (string, error) { return refuse() }})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/chat", ai)
	mux.Handle("/api/chat/", ai)
	mux.Handle("/agui", ag)
	mux.Handle("/agui/", ag)
	mux.Handle("/a2a", aa)
	return mux
}

// A body that never finishes, on a plain http.Server with no timeouts of
// its own, is answered 408 request_timeout once the handler's body
// timeout has passed, with Connection: close; the server closes the
// connection, and the goroutines return to the baseline: a slow-loris
// client pins nothing. Not parallel: it counts the process's goroutines.
func TestABodyThatNeverFinishesIs408(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("c1", ""))
	ts := httptest.NewServer(frontendMux(t, bus, 200*time.Millisecond))
	defer ts.Close()
	base := goleak.IgnoreCurrent()
	for _, path := range []string{"/api/chat", "/api/chat/c1/stop", "/agui", "/a2a"} {
		t.Run(path, func(t *testing.T) {
			var conns []net.Conn
			for range 10 {
				c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
				require.NoError(t, err)
				defer c.Close()
				_, err = c.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\""))
				require.NoError(t, err)
				conns = append(conns, c)
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, c := range conns {
				require.NoError(t, c.SetReadDeadline(deadline))
				var b strings.Builder
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break // the server closed it (or the 5 s ran out: the asserts say)
					}
				}
				got := b.String()
				assert.True(t, strings.HasPrefix(got, "HTTP/1.1 408 "), "%s", got)
				assert.Contains(t, got, "did not arrive in time") // request_timeout; a JSON-RPC error on /a2a
				assert.Contains(t, got, "Connection: close")
			}
		})
	}
	assert.Equal(t, uint64(0), bus.LastEventID(), "nothing written to the log")
	goleak.VerifyNone(t, base)
}
