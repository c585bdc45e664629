package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/demo"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// screenshotPath is where TestChromiumPage leaves its screenshot, relative
// to this package (the repository's gitignored artifacts/ folder).
const screenshotPath = "../artifacts/agentserver.png"

// browserTab opens a tab of the package's one headless Chromium (exec,
// started by the first call, see sharedBrowser) in a browser context of
// its own (Target.createBrowserContext: its own window, cookies, storage
// and cache, as a fresh browser had), whose chromedp context ends after
// timeout. The returned func closes the tab and disposes of its browser
// context; defer it where the tab must be gone (before the servers it
// talks to are stopped, for instance). TestMain stops the browser.
func browserTab(t *testing.T, exec string, timeout time.Duration) (context.Context, func()) {
	t.Helper()
	browser, err := sharedBrowser(exec)
	require.NoError(t, err, "starting %s", exec)
	tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(tab, timeout)
	return ctx, func() {
		cancelTimeout()
		cancelTab()
	}
}

// The package's one Chromium: starting a browser costs about a second of
// CPU and more on a busy machine, once per test before; the tests now
// share it, each in a browser context of its own.
var browserState struct {
	mu      sync.Mutex
	ctx     context.Context // the browser's first tab, left blank
	cancel  func()          // stops the browser
	dataDir string
}

// sharedBrowser returns the chromedp context of the running browser,
// starting it first when there is none or the last one ended (crashed).
func sharedBrowser(exec string) (context.Context, error) {
	b := &browserState
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx != nil && b.ctx.Err() == nil {
		return b.ctx, nil
	}
	stopBrowserLocked()
	dir, err := os.MkdirTemp("", "replaybus-e2e-chromium-")
	if err != nil {
		return nil, err
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromiumAllocator(exec, dir)...)
	ctx, cancel := chromedp.NewContext(actx)
	b.ctx, b.dataDir = ctx, dir
	b.cancel = func() {
		cancel()
		cancelAlloc()
	}
	if err := chromedp.Do(ctx); err != nil { // starts it
		stopBrowserLocked()
		return nil, err
	}
	return ctx, nil
}

// stopBrowser stops the shared browser, if one runs, and removes its
// profile. TestMain calls it before looking for leaked goroutines.
func stopBrowser() {
	browserState.mu.Lock()
	defer browserState.mu.Unlock()
	stopBrowserLocked()
}

func stopBrowserLocked() {
	b := &browserState
	if b.cancel != nil {
		b.cancel()
	}
	if b.dataDir != "" {
		_ = os.RemoveAll(b.dataDir)
	}
	b.ctx, b.cancel, b.dataDir = nil, nil, ""
}

// chromiumAllocator: the flags Chromium needs as root on a machine without
// a network beyond loopback, with its profile in dataDir.
func chromiumAllocator(exec, dataDir string) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exec),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dataDir),
		chromedp.WindowSize(1440, 900),
	)
}

// idCollector reads a reference subscription made in-process: every id the
// bus published in the page's scope.
type idCollector struct {
	mu   sync.Mutex
	ids  []uint64
	done chan struct{}
}

func collect(sub *eventbus.Subscription) *idCollector {
	c := &idCollector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range sub.Events() {
			if ev.ID != 0 {
				c.mu.Lock()
				c.ids = append(c.ids, ev.ID)
				c.mu.Unlock()
			}
		}
	}()
	return c
}

func (c *idCollector) snapshot() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// TestChromiumPage loads the example page in headless Chromium while the
// demo runs, forces two disconnects with the page's button, and checks the
// page's list of received ids against every id the bus published in the
// page's scope (session "demo", descendants): the same ids, none twice,
// strictly increasing — once over SSE, once over WebSocket, where the page
// resumes with its {"resume": …} first message, batched (ws.SubprotocolBatch
// negotiated) until the last resume, which does not offer it and reads one
// frame per message. Each connection also gets
// the server's targeted hello, exactly once. The SSE run leaves a
// screenshot in artifacts/agentserver.png.
func TestChromiumPage(t *testing.T) {
	for _, transport := range []string{"sse", "ws"} {
		t.Run(transport, func(t *testing.T) { chromiumPage(t, transport) })
	}
}

func chromiumPage(t *testing.T, transport string) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")

	ts := startServer(t, eventbus.Options{ReplayBufferSize: 10_000}, server.Options{
		DefaultSession: demo.DefaultParent,
		DefaultScope:   scope.Descendants,
		Types:          demo.Types,
		SSE:            sse.HandlerOptions{Retry: 500 * time.Millisecond},
		Hello:          true,
	})
	require.NoError(t, ts.bus.CreateSession(demo.DefaultParent, ""))
	refCtx, stopRef := context.WithCancel(context.Background())
	defer stopRef()
	ref, err := ts.bus.Subscribe(refCtx, demo.DefaultParent, eventbus.SubscribeOptions{Scope: scope.Descendants, MaxQueued: 1_000_000})
	require.NoError(t, err)
	want := collect(ref)

	ctx, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?transport="+transport)), "loading the page")
	waitIDs := func(min int) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`window.connState === "open" && window.receivedIds.length >= `+itoa(min),
			chromedp.WithPollingTimeout(30*time.Second)))
		require.NoError(t, err, "waiting for %d ids", min)
	}
	waitIDs(0)

	// The demo, started once the page listens, runs until the forced
	// disconnects are done and each resume has carried live ids after its
	// replay: a demo of one run (11 s) ended first when the page was slow
	// (a loaded machine), and the ids the test waits for never came.
	demoCtx, stopDemo := context.WithCancel(context.Background())
	defer stopDemo()
	demoDone := make(chan error, 1)
	demoStart := time.Now()
	go func() {
		demoDone <- demo.Run(demoCtx, ts.bus, demo.Options{TokensPerSecond: 40, Seed: 7})
	}()
	waitIDs(20)

	// Two forced disconnects: the page closes its stream and opens a
	// new one from its cursor (the module sends it as Last-Event-ID).
	for i := range 2 {
		require.NoError(t, chromedp.Do(ctx, chromedp.Sleep(time.Second)))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.receivedIds.length`))
		require.NoError(t, err)
		if i == 1 && transport == "ws" {
			// The last resume without the batched subprotocol: the page
			// decodes both forms, one connection after the other.
			_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.replaybusPage.wsBatch = false; true`))
			require.NoError(t, err)
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("drop"))), "drop %d", i+1)
		if i == 1 && transport == "sse" {
			// The screenshot, mid-run, just after the second resume: the
			// replayed rows and replay_complete in the log, sub-agents busy.
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](
				`window.connState === "open" && window.frames.filter(f => f.type === "replay_complete").length >= 2`,
				chromedp.WithPollingTimeout(30*time.Second)))
			require.NoError(t, err, "waiting for the second resume")
			require.NoError(t, chromedp.Do(ctx, chromedp.Sleep(150*time.Millisecond)))
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Dir(screenshotPath), 0o755))
			require.NoError(t, os.WriteFile(screenshotPath, png, 0o644))
		}
		waitIDs(n + 20)
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.connState`))
	require.NoError(t, err)
	assert.Equal(t, "open", state)

	stopDemo() // Run returns once nothing of it publishes any more
	select {
	case err := <-demoDone:
		require.NoError(t, err, "demo run")
	case <-time.After(60 * time.Second):
		t.Fatal("the demo did not stop in 60 s")
	}
	runTime := time.Since(demoStart)
	last := ts.bus.LastEventID()
	require.Eventually(t, func() bool {
		ids := want.snapshot()
		return len(ids) > 0 && ids[len(ids)-1] == last
	}, 10*time.Second, 10*time.Millisecond, "the reference subscriber must see the last id %d", last)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`window.receivedIds.length > 0 && window.receivedIds[window.receivedIds.length-1] === `+itoa(int(last)),
		chromedp.WithPollingTimeout(15*time.Second)))
	require.NoError(t, err, "the page must catch up to id %d", last)

	require.NoError(t, chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`window.renderIds(); true`)(ctx, tg)
		return err
	})))

	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
	require.NoError(t, err)
	frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]any](`window.frames`))
	require.NoError(t, err)
	connects, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.replaybusPage.connects`))
	require.NoError(t, err)
	idsText, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("ids")))
	require.NoError(t, err)
	protocols, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.wsProtocols`))
	require.NoError(t, err)
	stopRef()
	<-want.done
	wantIDs := want.snapshot()

	require.NotEmpty(t, got, "the page received no id")
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("page ids not strictly increasing at %d: %d after %d", i, got[i], got[i-1])
		}
	}
	assert.Equal(t, wantIDs, got, "the page must hold every id published in its scope, once, in order")
	var completes, hellos int
	for _, f := range frames {
		switch f["type"] {
		case frame.TypeReplayComplete:
			completes++
		case server.TypeHello: // the targeted frame: no id, this connection only
			hellos++
			d, _ := f["data"].(map[string]any)
			want := map[string]string{"sse": "sse", "ws": "websocket"}[transport]
			assert.Equal(t, want, d["transport"])
		case frame.TypeSlowClientWarning: // a slow browser is told, but loses nothing
		default:
			t.Errorf("unexpected frame on the page: %v", f)
		}
	}
	assert.GreaterOrEqual(t, completes, 2, "each resume ends its replay with replay_complete")
	assert.GreaterOrEqual(t, connects, 3, "one connect and two resumes (more only if the browser reconnected by itself)")
	assert.Equal(t, connects, hellos, "every connection greeted once; the greeting never counted as an id")
	assert.Equal(t, itoa(len(got)), itoa(len(splitFields(idsText))), "<pre id=ids> lists the same ids")
	if transport == "ws" {
		// ws.protocol of each connection: batched until the test stopped
		// offering it before the second drop, one frame per message after.
		require.Len(t, protocols, connects, "one ws.protocol per connection")
		assert.Equal(t, []string{ws.SubprotocolBatch, ws.SubprotocolBatch}, protocols[:2], "the page offers the batched form and the handler selects it")
		assert.Equal(t, "", protocols[len(protocols)-1], "without the offer, single messages")
	} else {
		assert.Empty(t, protocols, "no WebSocket over SSE")
	}
	st := ts.bus.Stats()
	assert.Zero(t, st.Guarded)
	t.Logf("chromium over %s: %d ids (1…%d), %d connects, %d hellos, %d replayed by the bus, demo run %v",
		transport, len(got), last, connects, hellos, st.Replayed, runTime.Round(time.Millisecond))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("chromium context timed out")
	}
}

// TestChromiumServerRestart: the page's EventSource outlives a server
// restart. The new bus has a new epoch; the browser's own reconnect sends
// the old "<epoch>-<seq>" id, the server answers state_resync_required
// {epoch_reset} and replays its whole buffer, and the page starts its id
// list again: exactly the new server's ids, in order.
func TestChromiumServerRestart(t *testing.T) {
	for _, transport := range []string{"sse", "ws"} {
		t.Run(transport, func(t *testing.T) { chromiumServerRestart(t, transport) })
	}
}

// chromiumServerRestart is TestChromiumServerRestart over one transport:
// over WebSocket the page's resume message carries the old server's last id
// and the epoch that came with it.
func chromiumServerRestart(t *testing.T, transport string) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	chunk := func(bus *eventbus.Bus, n int) {
		for i := range n {
			_, err := bus.Publish(demo.DefaultParent, demo.TypeMessageChunk, map[string]any{
				"sessionId": demo.DefaultParent,
				"update":    map[string]any{"sessionUpdate": demo.TypeMessageChunk, "content": map[string]any{"type": "text", "text": itoa(i) + " "}},
			})
			require.NoError(t, err)
		}
	}
	// serve runs one incarnation of the server on addr ("127.0.0.1:0" the
	// first time) and returns its bus, its address and a stop func.
	serve := func(addr string) (*eventbus.Bus, string, func()) {
		bus, err := eventbus.New(eventbus.Options{})
		require.NoError(t, err)
		require.NoError(t, bus.CreateSession(demo.DefaultParent, ""))
		srv, err := server.New(bus, server.Options{
			DefaultSession: demo.DefaultParent, Types: demo.Types,
			SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
		})
		require.NoError(t, err)
		var ln net.Listener
		require.Eventually(t, func() bool {
			ln, err = net.Listen("tcp", addr)
			return err == nil
		}, 5*time.Second, 20*time.Millisecond, "listening on %s: %v", addr, err)
		hs := &http.Server{Handler: srv}
		hs.RegisterOnShutdown(func() { _ = srv.Close() })
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = hs.Serve(ln)
		}()
		var once sync.Once
		return bus, ln.Addr().String(), func() {
			once.Do(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				assert.NoError(t, hs.Shutdown(ctx))
				<-served
				assert.NoError(t, srv.WS().Shutdown(ctx), "hijacked WebSockets: Shutdown does not wait for them")
				_ = bus.Close()
			})
		}
	}

	busA, addr, stopA := serve("127.0.0.1:0")
	defer stopA()
	chunk(busA, 30)

	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/?transport="+transport)))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.receivedIds.length === 30`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the first server's 30 events")

	stopA()
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "reconnecting"`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the page notices the server is gone")

	busB, _, stopB := serve(addr)
	defer stopB()
	require.NotEqual(t, busA.Epoch(), busB.Epoch())
	chunk(busB, 10)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.receivedIds.length === 10`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the page resumes on the new server")
	chunk(busB, 5)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.receivedIds.length === 15`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "and goes on live")

	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, got)
	frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]any](`window.frames`))
	require.NoError(t, err)
	require.NotEmpty(t, frames)
	assert.Equal(t, frame.TypeStateResyncRequired, frames[0]["type"])
	data, _ := frames[0]["data"].(map[string]any)
	assert.Equal(t, frame.ReasonEpochReset, data["reason"])
	assert.Equal(t, busB.Epoch(), data["epoch"])
	assert.EqualValues(t, 30, data["lastDeliveredId"], "the browser sent the old server's last id")
	// Issue 12.13: the restart notice is informational and goes away once
	// the replay completed; the counters start again with the ids. The
	// counter is DOM text, written by the render the last frame scheduled:
	// read it after that render (reading at once flaked, see afterRender).
	require.NoError(t, afterRender(ctx))
	counters, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("st-received").textContent, String(window.receivedIds.length)]`))
	require.NoError(t, err)
	assert.Equal(t, counters[1], counters[0], "the events counter agrees with the received ids after a restart")
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("notice").hidden`, chromedp.WithPollingTimeout(10*time.Second)))
	assert.NoError(t, err, "the restart notice does not stay up forever")
	t.Logf("restart over %s: epoch %s → %s, the page resynced and holds ids 1…15 of the new server", transport, busA.Epoch(), busB.Epoch())
}
