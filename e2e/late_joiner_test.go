package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/demo"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// TestChromiumLateJoinerGetsWholeReply is issue 20's "done when": the
// example server runs over a bus with ACP compaction and the default ring
// of 100 records; a reply of 2,000 agent_message_chunk deltas is published
// and ends; only then does the example page open in headless Chromium. The
// page must receive the reply as one replayed record — one row with a ×2000
// badge, one received id (the reply's last) — whose text equals the
// concatenation of the 2,000 deltas, with no state_resync_required
// (ring_evicted) frame: without compaction the ring would have kept only
// the last 100 deltas.
func TestChromiumLateJoinerGetsWholeReply(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	const (
		session = "late"
		deltas  = 2000
	)
	ts := startServer(t, eventbus.Options{ReplayCompact: coalesce.ACP}, server.Options{
		DefaultSession: session,
		DefaultScope:   scope.Descendants,
		Types:          demo.Types,
		SSE:            sse.HandlerOptions{Retry: 500 * time.Millisecond},
	})
	require.NoError(t, ts.bus.CreateSession(session, ""))

	var want strings.Builder
	var first, last uint64
	for i := range deltas {
		text := "tok" + strconv.Itoa(i) + " "
		want.WriteString(text)
		ev, err := ts.bus.Publish(session, demo.TypeMessageChunk, map[string]any{
			"sessionId": session,
			"update": map[string]any{
				"sessionUpdate": demo.TypeMessageChunk,
				"content":       map[string]any{"type": "text", "text": text},
			},
		})
		require.NoError(t, err)
		if i == 0 {
			first = ev.ID
		}
		last = ev.ID
	}
	require.Equal(t, uint64(deltas-1), last-first, "the deltas have consecutive ids")

	// The reply has ended: the page joins late.
	tab, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(ts.ts.URL+"/?session="+session+"&scope=descendants")))
	// A connect without a cursor gets no replay_complete: the page has the
	// whole replay once it holds the reply's last id (a gap frame would
	// have come before it).
	_, err := chromedp.Run(tab, chromedp.Poll[bool](
		`window.receivedIds.length > 0 && window.receivedIds[window.receivedIds.length-1] === `+itoa(int(last)),
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the page must reach id %d", last)
	require.NoError(t, afterRender(tab), "the rows are drawn by the next render")

	ids, err := chromedp.Run(tab, chromedp.Evaluate[[]uint64](`window.receivedIds`))
	require.NoError(t, err)
	assert.Equal(t, []uint64{last}, ids, "one record, carrying the reply's last id: %s", pageState(tab))

	frames, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`window.frames.map(f => f.type + ":" + ((f.data && f.data.reason) || ""))`))
	require.NoError(t, err)
	for _, f := range frames {
		assert.NotContains(t, f, "state_resync_required", "no gap announced (ring_evicted or resync): %v", frames)
		assert.NotContains(t, f, "ring_evicted", "no gap announced: %v", frames)
	}

	text, err := chromedp.Run(tab, chromedp.Evaluate[map[string]string](`window.agentText`))
	require.NoError(t, err)
	assert.Equal(t, want.String(), text[session], "the replayed text is the concatenation of the %d deltas", deltas)

	type row struct {
		ID     string `json:"id"`
		Merged string `json:"merged"`
		Title  string `json:"title"`
		Replay bool   `json:"replay"`
	}
	rows, err := chromedp.Run(tab, chromedp.Evaluate[[]row](`Array.from(document.querySelectorAll("#log .row.t-agent_message_chunk")).map(r => ({
		id: r.querySelector(".id").textContent,
		merged: (r.querySelector(".badge.m") || {}).textContent || "",
		title: r.querySelector(".id").title,
		replay: r.classList.contains("replay"),
	}))`))
	require.NoError(t, err)
	require.Len(t, rows, 1, "the reply is one row in the event log")
	assert.Equal(t, row{
		ID:     "#" + strconv.FormatUint(last, 10),
		Merged: "×" + strconv.Itoa(deltas),
		Title:  "merged: ids " + strconv.FormatUint(first, 10) + "…" + strconv.FormatUint(last, 10),
		Replay: true,
	}, rows[0], "one replayed row holding all %d deltas", deltas)

	received, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("st-received").textContent`))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(deltas), received, "the counter counts the events the record holds")
	t.Logf("late joiner: %d deltas (ids %d…%d) replayed as %d record(s), frames %v", deltas, first, last, len(ids), frames)
}
