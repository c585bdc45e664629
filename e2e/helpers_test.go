package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// needTool returns the path of a client program, skipping the test when it
// is missing outside CI; under CI a missing client fails the test.
func needTool(t *testing.T, name string, candidates ...string) string {
	t.Helper()
	for _, c := range append(candidates, name) {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found, and CI is set: .ci/run must install it", name)
	}
	t.Skipf("%s not found (set CI=1 to make this a failure)", name)
	return ""
}

// testServer is an agentserver on a loopback port.
type testServer struct {
	bus *eventbus.Bus
	srv *server.Server
	ts  *httptest.Server
}

// startServer starts the agentserver handler on 127.0.0.1 over a bus with
// cfg. Cleanup ends the SSE streams, then the listener, then the bus.
func startServer(t *testing.T, cfg eventbus.Options, o server.Options) *testServer {
	t.Helper()
	bus, err := eventbus.New(cfg)
	require.NoError(t, err)
	srv, err := server.New(bus, o)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5e9)
		defer cancel()
		require.NoError(t, srv.SSE().Shutdown(ctx), "SSE streams did not end")
		require.NoError(t, srv.WS().Shutdown(ctx), "WebSockets did not end")
		ts.Close()
		_ = bus.Close()
	})
	return &testServer{bus: bus, srv: srv, ts: ts}
}

// cutter ends each SSE response after n event frames (frames with an id:
// line), the way a flaky network or an impatient proxy would: it forwards the
// bytes up to the end of the n-th frame, cancels the request context so the
// handler returns and the response ends, and swallows anything written after.
// It records the Last-Event-ID header of every request.
type cutter struct {
	n int

	mu      sync.Mutex
	lastIDs []string // Last-Event-ID of each request, in order
	cuts    int
}

func (c *cutter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.lastIDs = append(c.lastIDs, r.Header.Get("Last-Event-ID"))
		c.mu.Unlock()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		cw := &cutWriter{ResponseWriter: w, left: c.n, bol: true, cancel: func() {
			c.mu.Lock()
			c.cuts++
			c.mu.Unlock()
			cancel()
		}}
		next.ServeHTTP(cw, r.WithContext(ctx))
	})
}

func (c *cutter) requests() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lastIDs...), c.cuts
}

// cutWriter scans the SSE byte stream line by line; see cutter.
type cutWriter struct {
	http.ResponseWriter
	left   int
	cancel func()
	cut    bool
	bol    bool   // at the beginning of a line
	prefix []byte // first bytes of the current line
	hasID  bool   // the current frame has an id: line
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.cut {
		return len(p), nil
	}
	for i, b := range p {
		if c.bol && b == '\n' { // blank line: the frame ends
			if c.hasID {
				c.hasID = false
				c.left--
				if c.left == 0 {
					c.cut = true
					if _, err := c.ResponseWriter.Write(p[:i+1]); err != nil {
						return 0, err
					}
					c.cancel()
					return len(p), nil
				}
			}
			continue
		}
		if b == '\n' {
			if string(c.prefix) == "id:" {
				c.hasID = true
			}
			c.bol, c.prefix = true, c.prefix[:0]
			continue
		}
		c.bol = false
		if len(c.prefix) < 3 {
			c.prefix = append(c.prefix, b)
		}
	}
	return c.ResponseWriter.Write(p)
}

func itoa(n int) string { return strconv.Itoa(n) }

func splitFields(s string) []string { return strings.Fields(s) }

// afterRender returns once the example page has rendered what its state
// holds. The page updates window.receivedIds, window.frames and
// window.connState at once, but its DOM (counters, log rows, agent cards)
// only in a render that each change schedules with requestAnimationFrame;
// a test that polled the state and then read the DOM at once saw the
// previous render's text whenever the frames had arrived before the poll
// began (its first check is immediate, outside any animation frame):
// 19 of 100 such reads in a probe. This waits for the next animation frame:
// the page's render, requested before, runs ahead of it in that frame
// (callbacks run in the order they were requested).
func afterRender(ctx context.Context) error {
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`new Promise((resolve) => requestAnimationFrame(() => resolve(true)))`, chromedp.EvalAwaitPromise))
	return err
}

// pageState describes the demo page's connection for a failure message: its
// state, how many ids it has and the last, the synthetic frames' types, the
// notice and the last rows of the connection log.
func pageState(ctx context.Context) string {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		state: window.connState,
		ids: window.receivedIds.length,
		lastId: window.receivedIds[window.receivedIds.length - 1],
		frames: window.frames.map(f => f.type),
		notice: (document.getElementById("notice") || {}).textContent,
		log: [...document.querySelectorAll("#log .row")].slice(-8).map(r => r.textContent),
	})`))
	if err != nil {
		return "page state unavailable: " + err.Error()
	}
	return s
}
