package e2e

import (
	"context"
	"net/http"
	"sync"
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

// Issue 12.13: the demo page gave no way to see a slow-client warning or an
// eviction, showed session_closed as raw JSON, let closed agents' cards
// push live ones below the fold, and showed an unlabelled time. In
// headless Chromium: the Queue control (?maxQueued=16) with a connection
// that cannot take the burst brings slow_client_warning and client_evicted
// frames, the page resumes and loses nothing; a closed sub-agent's card
// moves below the live one, folded; session_closed reads as a sentence; the
// list's time is labelled.
//
// The burst is 300 small frames (tens of KB): the socket buffers and
// Chromium's own take all of it whatever the page does, so a slow page
// alone never stops the stream's writer, and whether the 16-frame queue
// overflowed was a race between the publishing loop and that writer. The
// writer usually lost it; when it kept up, the page got all 303 ids and no
// frame at all, and the wait for client_evicted timed out after 40 s (seen
// once in a fresh-clone CI run; a publisher pausing 2 ms per event gives
// it every run). The stream's writes are therefore held during the burst,
// as full buffers would hold them, so the queue overflows every time.
func TestChromiumPageControls(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	var held writeHold
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 10_000}, server.Options{
		DefaultSession: "p", DefaultScope: scope.Descendants,
		SSE:        sse.HandlerOptions{Retry: 200 * time.Millisecond},
		WrapEvents: held.wrap,
	})
	require.NoError(t, ts.bus.CreateSession("p", ""))
	require.NoError(t, ts.bus.CreateSession("p.early", "p"))
	require.NoError(t, ts.bus.CreateSession("p.live", "p"))

	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?maxQueued=16")))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open"`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err)
	sel, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("max-queued").value`))
	require.NoError(t, err)
	assert.Equal(t, "16", sel, "the Queue control shows ?maxQueued=")

	// Cards: early first, then live; then early closes.
	publishN(t, ts, "p.early", 1)
	publishN(t, ts, "p.live", 1)
	require.NoError(t, ts.bus.CloseSession("p.early"))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.receivedIds.length === 3`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	require.NoError(t, afterRender(ctx), "the cards and rows are drawn by the next render")
	order, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#cards .card")].map(c => c.querySelector("code").textContent + (c.classList.contains("closed") ? ":closed" : ""))`))
	require.NoError(t, err)
	assert.Equal(t, []string{"p.live", "p.early:closed"}, order, "a closed agent's card goes below the live ones")
	flowShown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`getComputedStyle(document.querySelector("#cards .card.closed .flow")).display !== "none"`))
	require.NoError(t, err)
	assert.False(t, flowShown, "a closed card is folded")
	closedRow, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("#log .row.t-session_closed span")].map(s => s.textContent).pop()`))
	require.NoError(t, err)
	assert.Equal(t, "session p.early closed", closedRow)
	updated, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("sessions-updated").textContent`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	assert.Regexp(t, `^updated `, updated)

	// A slow page with a 16-frame queue whose connection takes nothing
	// during the burst: warning, eviction, resume.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[any](`window.replaybusPage.slowMs = 15`))
	require.NoError(t, err)
	held.hold()
	publishN(t, ts, "p.live", 300)
	held.release()
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`window.receivedIds.length === 303 && window.frames.some(f => f.type === "client_evicted")`,
		chromedp.WithPollingTimeout(40*time.Second)))
	require.NoError(t, err, "every event arrives, after an eviction and a resume; page: %s", pageState(ctx))
	types, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.frames.map(f => f.type)`))
	require.NoError(t, err)
	assert.Contains(t, types, "slow_client_warning")
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
	require.NoError(t, err)
	for i := 1; i < len(ids); i++ {
		require.Less(t, ids[i-1], ids[i], "strictly increasing")
	}
	require.NoError(t, afterRender(ctx))
	counters, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("st-received").textContent, String(window.receivedIds.length)]`))
	require.NoError(t, err)
	assert.Equal(t, counters[1], counters[0], "the events counter agrees with the received ids")
}

// writeHold holds the writes of the SSE streams it wraps while held, the
// way a connection whose buffers are full holds them: the stream's writer
// blocks in Write, and what is published meanwhile stays in its queue.
type writeHold struct {
	mu   sync.Mutex
	gate chan struct{} // nil: writes pass; else closed by release
}

func (h *writeHold) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
}

func (h *writeHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

func (h *writeHold) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&heldWriter{ResponseWriter: w, h: h}, r)
	})
}

type heldWriter struct {
	http.ResponseWriter
	h *writeHold
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline.
func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *heldWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	gate := w.h.gate
	w.h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return w.ResponseWriter.Write(p)
}

func publishN(t *testing.T, ts *testServer, session string, n int) {
	t.Helper()
	for i := range n {
		_, err := ts.bus.Publish(session, "note", map[string]int{"n": i})
		require.NoError(t, err)
	}
}

// Issue 12.6: a browser's EventSource gives up for good on a 429 (the
// subscriber cap, met while many streams reconnect at once). The page
// learns the status and reopens the stream after Retry-After plus jitter.
func TestChromiumPageRetriesTooManyRequests(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts := startServer(t, eventbus.Options{MaxSubscribers: 1}, server.Options{
		DefaultSession: "p", SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
	})
	require.NoError(t, ts.bus.CreateSession("p", ""))
	hog, err := ts.bus.Subscribe(context.Background(), "p", eventbus.SubscribeOptions{})
	require.NoError(t, err)

	ctx, closeBrowser := browserTab(t, chromium, 40*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/")))
	notice, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const n = document.getElementById("notice"); return !n.hidden && n.textContent.includes("retrying") ? n.textContent : null })()`,
		chromedp.WithPollingTimeout(15*time.Second)))
	require.NoError(t, err, "the page says it will retry the 429")
	assert.Contains(t, notice, "subscriber_limit_exceeded")
	hog.Close()
	publishN(t, ts, "p", 3)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.receivedIds.length === 3`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the page came back after Retry-After and got every event")
}
