package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/demo"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// coalesceScreenshot is where TestChromiumCoalesceSameText leaves a
// screenshot of the coalescing tab (the gitignored artifacts/ folder).
const coalesceScreenshot = "../artifacts/agentserver-coalesce.png"

// TestChromiumCoalesceSameText opens the example page twice in headless
// Chromium while one demo run streams, one tab with the coalesce toggle on
// (?coalesce=acp&throttle=150ms), one without; the coalescing tab joins
// later, so its history is replayed merged. Both must end with the same
// agent text per session, in the stream state and in the agent cards,
// while the coalescing tab shows far fewer rows, some marked with how many
// events they hold. It leaves a screenshot of the coalescing tab in
// artifacts/agentserver-coalesce.png.
func TestChromiumCoalesceSameText(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 10_000}, server.Options{
		DefaultSession: demo.DefaultParent,
		DefaultScope:   scope.Descendants,
		Types:          demo.Types,
		SSE:            sse.HandlerOptions{Retry: 500 * time.Millisecond},
	})
	require.NoError(t, ts.bus.CreateSession(demo.DefaultParent, ""))

	plain, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(plain, chromedp.Navigate(ts.ts.URL+"/?session=demo&scope=descendants")))
	merged, cancelMerged := chromedp.NewContext(plain) // a second tab of the same browser
	defer cancelMerged()
	open := func(ctx context.Context) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open"`, chromedp.WithPollingTimeout(30*time.Second)))
		require.NoError(t, err)
	}
	open(plain)

	demoCtx, stopDemo := context.WithCancel(context.Background())
	defer stopDemo()
	demoDone := make(chan error, 1)
	go func() { demoDone <- demo.Run(demoCtx, ts.bus, demo.Options{TokensPerSecond: 80, Runs: 1, Seed: 11}) }()
	// The coalescing tab joins once the run is under way: what it missed is
	// replayed, merged.
	require.Eventually(t, func() bool { return ts.bus.LastEventID() > 40 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, chromedp.Do(merged, chromedp.Navigate(ts.ts.URL+"/?session=demo&scope=descendants&coalesce=acp")))
	open(merged)
	checked, err := chromedp.Run(merged, chromedp.Evaluate[bool](`document.getElementById("coalesce").checked`))
	require.NoError(t, err)
	assert.True(t, checked, "the toggle shows coalescing on")

	select {
	case err := <-demoDone:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the demo run did not finish in 60 s")
	}
	last := ts.bus.LastEventID()
	for _, ctx := range []context.Context{plain, merged} {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`window.receivedIds.length > 0 && window.receivedIds[window.receivedIds.length-1] === `+itoa(int(last)),
			chromedp.WithPollingTimeout(15*time.Second)))
		require.NoError(t, err, "the page must reach id %d", last)
	}

	const cards = `Object.fromEntries(Array.from(document.querySelectorAll("#cards .card")).map(
		c => [c.querySelector("code").textContent, Array.from(c.querySelectorAll(".msg, .thought")).map(m => m.textContent).join("|")]))`
	read := func(ctx context.Context) (text, shown map[string]string, ids []uint64, mergedRows int) {
		t.Helper()
		require.NoError(t, afterRender(ctx), "the cards and rows are drawn by the next render")
		var err error
		text, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`window.agentText`))
		require.NoError(t, err)
		shown, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]string](cards))
		require.NoError(t, err)
		ids, err = chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
		require.NoError(t, err)
		mergedRows, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#log .badge.m").length`))
		require.NoError(t, err)
		return
	}
	png, err := chromedp.Run(merged, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(coalesceScreenshot), 0o755))
	require.NoError(t, os.WriteFile(coalesceScreenshot, png, 0o644))

	textOff, shownOff, idsOff, mergedOff := read(plain)
	textOn, shownOn, idsOn, mergedOn := read(merged)

	require.NotEmpty(t, textOff[demo.DefaultParent], "the plain tab shows agent text")
	assert.Equal(t, textOff, textOn, "the same final agent text per session, coalescing on or off")
	assert.Equal(t, shownOff, shownOn, "the same text in the agent cards")
	assert.Zero(t, mergedOff, "no merged rows without coalescing")
	assert.Positive(t, mergedOn, "merged rows say how many events they hold")
	assert.Less(t, len(idsOn), len(idsOff)/2, "coalescing delivers far fewer frames")
	for i := 1; i < len(idsOn); i++ {
		require.Greater(t, idsOn[i], idsOn[i-1], "ids strictly increase")
	}
	t.Logf("chromium coalesce: %d frames without, %d with (%d merged rows), last id %d", len(idsOff), len(idsOn), mergedOn, last)
}
