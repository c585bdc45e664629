package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// Issue 18.14, the page half, in headless Chromium: the page explained
// nothing about its FRAMES stat, counted replayed frames beside
// replay_complete's replayed events ("75 events replayed" beside "4
// REPLAYED" once coalescing merged them), showed "updated …" over an empty
// session list, promised a warning for "Queue 16" that the demo's rate never
// brings, kept its stream open on navigation, and listed every closed
// sub-agent of a replay as a card. Now: every stat says what it counts and
// the frames stat is "control frames"; the counters count events (a merged
// row counts every event it holds); an empty list says so and shows no
// time; choosing a queue limit says when it shows something; leaving the
// page closes its stream at once; closed agents are folded under one "N
// closed agents" line below the live ones.
func TestChromiumPageExplainsItself(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 10_000}, server.Options{
		DefaultScope: scope.Descendants,
		SSE:          sse.HandlerOptions{Retry: 200 * time.Millisecond},
	})
	ctx, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()

	// An empty server: no time over an empty list.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/")))
	empty, err := chromedp.Run(ctx, chromedp.Poll[string](
		`document.querySelector("#sessions li.empty") && document.querySelector("#sessions li.empty").textContent`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err)
	assert.Contains(t, empty, "no sessions yet")
	updated, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("sessions-updated").textContent`))
	require.NoError(t, err)
	assert.Empty(t, updated, "no time over an empty list")

	// Every stat says what it counts.
	titles, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".stats > div")].map(d => d.title)`))
	require.NoError(t, err)
	require.Len(t, titles, 6)
	for i, title := range titles {
		assert.NotEmpty(t, title, "stat %d has no explanation", i)
	}
	label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("st-frames").nextElementSibling.textContent`))
	require.NoError(t, err)
	assert.Equal(t, "control frames", label)

	// A run with a parent, 8 finished sub-agents and a live one; 60 text
	// chunks replayed merged.
	require.NoError(t, ts.bus.CreateSession("p", ""))
	chunk := func(session, text string) {
		_, err := ts.bus.Publish(session, "agent_message_chunk", map[string]any{"sessionId": session,
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})
		require.NoError(t, err)
	}
	for i := range 60 {
		chunk("p", fmt.Sprintf("w%d ", i))
	}
	for i := range 8 {
		id := fmt.Sprintf("p.done-%d", i)
		require.NoError(t, ts.bus.CreateSession(id, "p"))
		chunk(id, "done")
		require.NoError(t, ts.bus.CloseSession(id))
	}
	require.NoError(t, ts.bus.CreateSession("p.live", "p"))
	chunk("p.live", "working")
	want := ts.bus.LastEventID()

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?session=p&scope=descendants&coalesce=acp")))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`window.connState === "open" && window.receivedIds.length > 0 && window.receivedIds[window.receivedIds.length-1] === `+itoa(int(want)),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "page: %s", pageState(ctx))
	require.NoError(t, afterRender(ctx))
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("st-received").textContent, document.getElementById("st-replayed").textContent, String(window.receivedIds.length)]`))
	require.NoError(t, err)
	assert.Equal(t, "77", counts[0], "events: 60 + 8×2 + 1, merged rows counted by the events they hold")
	assert.Equal(t, "77", counts[1], "replayed events")
	rows, _ := parseInt(counts[2])
	assert.Less(t, rows, 77, "the replay arrived merged")

	// Closed agents: folded under one line below the live ones.
	fold, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		hidden: document.getElementById("closed-agents").hidden,
		open: document.getElementById("closed-agents").open,
		count: document.getElementById("closed-count").textContent,
		closed: [...document.querySelectorAll("#closed-cards .card")].length,
		live: [...document.querySelectorAll("#live-cards .card")].map(c => c.querySelector("code").textContent),
	})`))
	require.NoError(t, err)
	assert.Equal(t, false, fold["hidden"])
	assert.Equal(t, false, fold["open"], "folded until opened")
	assert.Equal(t, "8", fold["count"])
	assert.EqualValues(t, 8, fold["closed"])
	assert.Equal(t, []any{"p", "p.live"}, fold["live"])
	updated, err = chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("sessions-updated").textContent`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	assert.Regexp(t, `^updated `, updated)

	// A queue limit says when it shows something.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("max-queued");
		s.value = "16"; s.dispatchEvent(new Event("change")); return true })()`))
	require.NoError(t, err)
	notice, err := chromedp.Run(ctx, chromedp.Poll[string](`!document.getElementById("notice").hidden && document.getElementById("notice").textContent`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	assert.Contains(t, notice, "16 frames")
	assert.Contains(t, notice, "until the stream stalls")
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open"`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err)

	// Leaving the page closes its stream at once.
	require.Eventually(t, func() bool { return ts.bus.Stats().Subscribers == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/healthz")))
	require.Eventually(t, func() bool { return ts.bus.Stats().Subscribers == 0 }, 5*time.Second, 10*time.Millisecond,
		"the page's subscription ends when the page goes")
}

func parseInt(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}
