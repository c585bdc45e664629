package e2e

import (
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
)

// cutAfterStart cuts the first SSE response right after its first line with
// an id (a live-only stream's stream_start frame) and holds every later
// request until published is closed, so that events are published while
// the client is cut off. It records each request's Last-Event-ID.
type cutAfterStart struct {
	first     cutter
	published chan struct{}

	mu       sync.Mutex
	requests int
}

func newCutAfterStart() *cutAfterStart {
	return &cutAfterStart{first: cutter{n: 1}, published: make(chan struct{})}
}

func (c *cutAfterStart) wrap(next http.Handler) http.Handler {
	cut := c.first.wrap(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests++
		n := c.requests
		c.mu.Unlock()
		if n == 1 {
			cut.ServeHTTP(w, r)
			return
		}
		<-c.published
		c.first.mu.Lock()
		c.first.lastIDs = append(c.first.lastIDs, r.Header.Get("Last-Event-ID"))
		c.first.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// TestChromiumEventSourceLiveOnlyResumesFromStart (issue 18 item 3): a
// browser's own EventSource on a live-only URL (?replay=0), cut right after
// the stream_start frame and before its first event, reconnects by itself
// with that frame's id as Last-Event-ID and receives every event published
// while it was cut off, once, in order; stream_start reaches no listener
// the page did not register for it.
func TestChromiumEventSourceLiveOnlyResumesFromStart(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	c := newCutAfterStart()
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{
		SSE:        sse.HandlerOptions{Retry: 200 * time.Millisecond},
		WrapEvents: c.wrap,
	})
	require.NoError(t, ts.bus.CreateSession("run", ""))

	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/healthz")), "a page of the server's origin")
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`
		window.ids = []; window.messages = 0;
		window.es = new EventSource('/session/run/events?replay=0');
		window.es.addEventListener('tick', (e) => window.ids.push(JSON.parse(e.data).id));
		window.es.onmessage = () => window.messages++;
		true`))
	require.NoError(t, err)

	require.Eventually(t, func() bool { _, cuts := c.first.requests(); return cuts == 1 }, 20*time.Second, 5*time.Millisecond,
		"the first connection was never cut after its stream_start frame")
	const total = 5
	for i := 1; i <= total; i++ {
		_, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}
	close(c.published)

	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.ids.length >= 5`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the browser did not resume")
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.ids`))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids, "every event published during the cut, once, in order")
	messages, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.messages`))
	require.NoError(t, err)
	assert.Zero(t, messages, "stream_start is not dispatched to onmessage")
	lastIDs, _ := c.first.requests()
	require.GreaterOrEqual(t, len(lastIDs), 2)
	assert.Empty(t, lastIDs[0])
	assert.Equal(t, ts.bus.Epoch()+"-0", lastIDs[1], "the browser resumes from the stream_start id")
}
