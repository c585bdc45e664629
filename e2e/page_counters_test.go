package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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

// Issue 27.4: with coalescing on, the page's "events" counter and its
// "received ids" count different things (a merged row is one id for the
// events it holds) and the page did not say so. It says it where both are
// shown: "events" adds "in N rows" when they differ, and the received ids
// say they are one per row.
func TestChromiumPageCountersSayWhatTheyCount(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 10_000}, server.Options{
		DefaultScope: scope.Descendants, SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
	})
	require.NoError(t, ts.bus.CreateSession("p", ""))
	for i := range 60 {
		_, err := ts.bus.Publish("p", "agent_message_chunk", map[string]any{"sessionId": "p",
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("w%d ", i)}}})
		require.NoError(t, err)
	}
	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	for _, tc := range []struct {
		query     string
		rowsShown bool
	}{{"&coalesce=acp", true}, {"", false}} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?session=p&scope=session"+tc.query)))
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.replaybusPage.received === 60`,
			chromedp.WithPollingTimeout(20*time.Second)))
		require.NoError(t, err, "page: %s", pageState(ctx))
		require.NoError(t, afterRender(ctx))
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
			events: document.getElementById("st-received").textContent,
			rowsHidden: document.getElementById("st-rows").hidden,
			rows: document.getElementById("st-rows").textContent,
			ids: window.receivedIds.length,
			idsSummary: document.querySelector("details.ids summary").textContent,
			title: document.getElementById("st-received").parentElement.title,
		})`))
		require.NoError(t, err)
		assert.Equal(t, "60", got["events"], tc.query)
		assert.Contains(t, got["idsSummary"], "one per row with an id", "the ids say what they count")
		assert.Contains(t, got["title"], "received ids below: one id per row")
		if tc.rowsShown {
			ids, _ := got["ids"].(float64)
			require.Less(t, ids, 60.0, "the replay arrived merged")
			assert.Equal(t, false, got["rowsHidden"], "events ≠ ids: the page says why")
			assert.Equal(t, fmt.Sprintf("in %d rows", int(ids)), got["rows"])
		} else {
			assert.Equal(t, true, got["rowsHidden"], "one row per event: nothing to explain")
		}
	}
}

// staleSessions holds each GET /sessions answer for a while after the
// server computed it, as a slow network does: a list asked for before a
// session closed arrives after its session_closed event.
type staleSessions struct {
	next      http.Handler
	hold      time.Duration
	delivered atomic.Int64
}

func (s *staleSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/sessions" {
		s.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.next.ServeHTTP(rec, r)
	time.Sleep(s.hold)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	s.delivered.Add(1)
}

// Issue 27.4: the page's session list offered sub-agents that were
// already closed: a list fetched before the close (its answer arrives
// after the session_closed event) put them back until the next poll.
// The page drops a session from the list when its session_closed arrives
// and keeps it out of lists asked for before that; a list asked for
// after the close that still holds it (reopened) shows it again.
func TestChromiumSessionListHidesClosedSessions(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	srv, err := server.New(bus, server.Options{DefaultScope: scope.Descendants, SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond}})
	require.NoError(t, err)
	stale := &staleSessions{next: srv, hold: 1500 * time.Millisecond}
	ts := httptest.NewServer(stale)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.SSE().Shutdown(sctx)
		ts.Close()
		_ = bus.Close()
	})
	require.NoError(t, bus.CreateSession("p", ""))
	require.NoError(t, bus.CreateSession("p.a", "p"))
	_, err = bus.Publish("p.a", "note", map[string]int{"n": 1})
	require.NoError(t, err)

	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?session=p&scope=descendants")))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`window.connState === "open" && [...document.querySelectorAll("#sessions .sid")].some(e => e.textContent.includes("p.a"))`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "p.a is listed while open: %s", pageState(ctx))
	// Record every session the list shows from the close on.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.shown = new Set();
		const note = () => document.querySelectorAll("#sessions .sid").forEach(e => window.shown.add(e.textContent.replace("└ ", "")));
		new MutationObserver(note).observe(document.getElementById("sessions"), { childList: true, subtree: true });
		return true;
	})()`))
	require.NoError(t, err)

	// Close p.a while a list that still holds it is on its way.
	before := stale.delivered.Load()
	time.Sleep(100 * time.Millisecond) // the page's poll (every 2 s) has asked, or will
	require.NoError(t, bus.CloseSession("p.a"))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.frames !== undefined && window.receivedIds.length === 2`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the session_closed event arrived: %s", pageState(ctx))
	require.Eventually(t, func() bool { return stale.delivered.Load() >= before+3 }, 20*time.Second, 20*time.Millisecond,
		"lists asked for before and after the close were delivered")
	require.NoError(t, afterRender(ctx))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...window.shown]`))
	require.NoError(t, err)
	assert.NotContains(t, shown, "p.a", "a closed sub-agent is never offered again")
	assert.Contains(t, shown, "p")

	// Reopened: a list asked for after the reopening shows it again.
	require.NoError(t, bus.CreateSession("p.a", "p"))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`[...document.querySelectorAll("#sessions .sid")].some(e => e.textContent.includes("p.a"))`,
		chromedp.WithPollingTimeout(20*time.Second)))
	assert.NoError(t, err, "a reopened session is listed again")
}
