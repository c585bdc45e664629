package e2e

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// TestChromiumPageReconnectsAfterProxyRefusal: a browser's EventSource gives
// up for good on any non-200 answer, so the page asks once more to learn
// why. When that second request found the server back (a 200: the refusal
// was a proxy's 502 during a restart) or found nobody (a network error: the
// server still down), the page stayed "closed" for good. It now reconnects:
// at once after a 200, after 3 s plus jitter after a network error.
func TestChromiumPageReconnectsAfterProxyRefusal(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	for _, tc := range []struct {
		name   string
		second func(w http.ResponseWriter) bool // answers the page's second request itself, or lets it through (false)
	}{
		{"then the server answers", func(http.ResponseWriter) bool { return false }},
		{"then nobody answers", func(w http.ResponseWriter) bool {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close() // a network error for the fetch
			}
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			ts := startServer(t, eventbus.Options{}, server.Options{
				DefaultSession: "p", SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
				WrapEvents: func(h http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						switch n.Add(1) {
						case 1: // the EventSource: a proxy's refusal
							w.Header().Set("Content-Type", "application/json")
							w.WriteHeader(http.StatusBadGateway)
							_, _ = w.Write([]byte(`{"code":"bad_gateway","message":"upstream restarting"}`))
							return
						case 2: // the page's question why
							if tc.second(w) {
								return
							}
						}
						h.ServeHTTP(w, r)
					})
				},
			})
			require.NoError(t, ts.bus.CreateSession("p", ""))
			publishN(t, ts, "p", 3)

			ctx, closeBrowser := browserTab(t, chromium, 40*time.Second)
			defer closeBrowser()
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/")))
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.receivedIds.length === 3`,
				chromedp.WithPollingTimeout(20*time.Second)))
			require.NoError(t, err, "the page came back after the refusal and got every event")
			assert.GreaterOrEqual(t, n.Load(), int32(3), "refused, asked why, reconnected")
			publishN(t, ts, "p", 2)
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.receivedIds.length === 5`, chromedp.WithPollingTimeout(10*time.Second)))
			require.NoError(t, err, "and goes on live")
			ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
			require.NoError(t, err)
			assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids)
		})
	}
}
