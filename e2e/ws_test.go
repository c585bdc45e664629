package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// cutListener records the connections it accepts so that a test can cut
// them from the server side (WebSockets are hijacked: out of httptest's
// reach), and can give them a small send buffer so that a slow reader
// backs up into the server's queue at once.
type cutListener struct {
	net.Listener
	small bool // set before serving

	mu    sync.Mutex
	conns []net.Conn
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if tc, ok := c.(*net.TCPConn); ok && l.small {
			_ = tc.SetWriteBuffer(8 << 10)
		}
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// cut closes every connection accepted so far.
func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// startCutServer is startServer on a cutListener.
func startCutServer(t *testing.T, cfg eventbus.Options, o server.Options, small bool) (*testServer, *cutListener) {
	t.Helper()
	bus, err := eventbus.New(cfg)
	require.NoError(t, err)
	srv, err := server.New(bus, o)
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(srv)
	cl := &cutListener{Listener: ts.Listener, small: small}
	ts.Listener = cl
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.SSE().Shutdown(ctx))
		require.NoError(t, srv.WS().Shutdown(ctx), "WebSockets did not end")
		ts.Close()
		_ = bus.Close()
	})
	return &testServer{bus: bus, srv: srv, ts: ts}, cl
}

// wsNodeResult is what e2e/node/ws_client.mjs prints.
type wsNodeResult struct {
	IDs     []uint64  `json:"ids"`
	Frames  []string  `json:"frames"`
	Resumes []*string `json:"resumes"`
	Closes  []struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"closes"`
	Opens int   `json:"opens"`
	MS    int64 `json:"ms"`
}

// TestNodeWebSocketResumes: the npm ws package (pinned in e2e/node) reads a
// session over WebSocket while the test publishes 1…250 and cuts the
// connection from the server side four times; the script resumes with its
// {"resume": …} first message after each cut and must end with exactly ids
// 1…250, each once, in order.
func TestNodeWebSocketResumes(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/ws missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}
	const total, cuts = 250, 4
	ts, cl := startCutServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{}, false)
	require.NoError(t, ts.bus.CreateSession("run", ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	url := "ws" + strings.TrimPrefix(ts.ts.URL, "http") + "/session/run/ws"
	cmd := exec.CommandContext(ctx, node, "ws_client.mjs", url, strconv.Itoa(total), "45000")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	connected := func() {
		require.Eventually(t, func() bool { return ts.srv.WS().Stats().Active == 1 }, 20*time.Second, 2*time.Millisecond,
			"the ws client (re)connects; stderr: %s", &stderr)
	}
	connected()
	for i := 1; i <= total; i++ {
		_, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		if i%(total/(cuts+1)) == 0 && i < total {
			cl.cut()
			require.Eventually(t, func() bool { return ts.srv.WS().Stats().Active == 0 }, 5*time.Second, time.Millisecond)
			connected()
		}
		// A live stream at about one event a millisecond, read by the
		// client while it is published: the pace is the workload, not a
		// wait for something.
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-waited:
		require.NoError(t, err, "node ws_client.mjs: %s", &stderr)
	case <-ctx.Done():
		t.Fatalf("node did not finish: %s", &stderr)
	}
	var res wsNodeResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "output %q", stdout.String())
	want := make([]uint64, total)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	assert.Equal(t, want, res.IDs, "every id exactly once, in order, across %d cuts", cuts)
	require.Len(t, res.Closes, cuts, "one close per cut")
	for _, c := range res.Closes {
		assert.Equal(t, 1006, c.Code, "a cut is an abnormal closure")
	}
	require.Len(t, res.Resumes, cuts+1)
	assert.Nil(t, res.Resumes[0], "the first connect has no cursor")
	for _, r := range res.Resumes[1:] {
		require.NotNil(t, r, "every reconnect resumes")
	}
	assert.Equal(t, cuts+1, res.Opens)
	completes := 0
	for _, f := range res.Frames {
		if f == frame.TypeReplayComplete {
			completes++
		}
	}
	assert.Equal(t, cuts, completes, "each resume ends its replay with replay_complete")
	assert.Zero(t, ts.bus.Stats().Guarded)
	t.Logf("ws (node %s): %d ids over %d connections, resumes %v, %d ms", "ws@8.23.0", len(res.IDs), res.Opens, derefAll(res.Resumes), res.MS)
}

func derefAll(ps []*string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if p != nil {
			out[i] = *p
		}
	}
	return out
}

// TestChromiumSlowPageGets1008: the page over WebSocket, made slow (4 ms
// of work per frame), cannot keep up with a burst; its server-side queue
// (32 frames) overflows, the server sends client_evicted and closes with
// 1008 "slow consumer"; the page shows the code, resumes, and once it is
// fast again holds every id exactly once. Every connection negotiated
// batched messages, and the burst came in fewer messages than ids.
func TestChromiumSlowPageGets1008(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts, _ := startCutServer(t, eventbus.Options{ReplayBufferSize: 10_000, MaxQueueSize: 32}, server.Options{
		DefaultSession: "slow",
		// A long grace: the slow page reads what the socket buffers hold
		// before it reaches the close frame.
		WS: wsOptionsSlow(),
	}, true)
	require.NoError(t, ts.bus.CreateSession("slow", ""))

	ctx, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?transport=ws&session=slow")))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open"`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.replaybusPage.slowMs = 4; true`))
	require.NoError(t, err)

	payload := map[string]string{"text": strings.Repeat("x", 1000)}
	const burst = 3000
	for range burst {
		_, err := ts.bus.Publish("slow", "chunk", payload)
		require.NoError(t, err)
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.closeCodes.some(c => c.code === 1008 && c.reason === "slow consumer")`,
		chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the slow page sees 1008 slow consumer")
	shown, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("close-code")))
	require.NoError(t, err)
	assert.Contains(t, shown, "1008", "the page shows the close code")

	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.replaybusPage.slowMs = 0; true`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.receivedIds.length > 0 && window.receivedIds[window.receivedIds.length-1] === `+itoa(burst),
		chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the page resumes and catches up")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
	require.NoError(t, err)
	want := make([]uint64, burst)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	assert.Equal(t, want, got, "evicted, resumed, nothing lost, nothing twice")
	frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]any](`window.frames`))
	require.NoError(t, err)
	evicted := 0
	for _, f := range frames {
		if f["type"] == frame.TypeClientEvicted {
			evicted++
		}
	}
	assert.GreaterOrEqual(t, evicted, 1, "client_evicted precedes the 1008")
	closes, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]any](`window.closeCodes`))
	require.NoError(t, err)
	// Every connection negotiated the batched form, and the burst came
	// in arrays of many frames: fewer messages than ids.
	protocols, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.wsProtocols`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(protocols), 2, "evicted and resumed: two connections at least")
	for i, p := range protocols {
		assert.Equal(t, ws.SubprotocolBatch, p, "connection %d's ws.protocol", i+1)
	}
	messages, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.replaybusPage.wsMessages`))
	require.NoError(t, err)
	assert.Less(t, messages, len(got), "batched: fewer WebSocket messages than ids")
	t.Logf("slow page: %d ids in %d messages, closes %v, %d client_evicted frames, ws stats %+v", len(got), messages, closes, evicted, ts.srv.WS().Stats())
}

func wsOptionsSlow() ws.HandlerOptions { return ws.HandlerOptions{CloseGrace: 30 * time.Second} }
