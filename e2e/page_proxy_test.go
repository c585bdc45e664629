package e2e

import (
	"encoding/json"
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
// up for good on any non-200 answer, and the page's own retry once stayed
// "closed" for good when its next request found the server back (the
// refusal was a proxy's 502 during a restart) or found nobody (a network
// error: the server still down). The page now reads the stream with the
// module (replaybus.js), which reads the 502 itself, tells the page (its
// code and message), and reconnects after its backoff, again after a
// network error, until the server answers.
func TestChromiumPageReconnectsAfterProxyRefusal(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	for _, tc := range []struct {
		name     string
		second   func(w http.ResponseWriter) bool // answers the page's second request itself, or lets it through (false)
		requests int32                            // the stream requests until one is let through
		later    int                              // the status of any error after the 502 (0: a network error; Chromium may retry a request whose reused connection closed by itself, unseen)
	}{
		{"then the server answers", func(http.ResponseWriter) bool { return false }, 2, -1},
		{"then nobody answers", func(w http.ResponseWriter) bool {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close() // a network error for the fetch
			}
			return true
		}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			ts := startServer(t, eventbus.Options{}, server.Options{
				DefaultSession: "p", SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
				WrapEvents: func(h http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						switch n.Add(1) {
						case 1: // the first connect: a proxy's refusal
							w.Header().Set("Content-Type", "application/json")
							w.WriteHeader(http.StatusBadGateway)
							_, _ = w.Write([]byte(`{"code":"bad_gateway","message":"upstream restarting"}`))
							return
						case 2: // the retry after the backoff
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
			assert.Equal(t, tc.requests, n.Load(), "refused (and no answer), then reconnected: no request more")
			var errs []struct {
				Status  int
				Code    string
				Message string
				Retry   bool
				Fatal   bool
			}
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.streamErrors)`))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal([]byte(raw), &errs))
			require.NotEmpty(t, errs, "the page was told of the refusal")
			for i, e := range errs {
				want := tc.later
				if i == 0 {
					want = http.StatusBadGateway
				}
				assert.Equal(t, want, e.Status, raw)
				assert.True(t, e.Retry, "retried, not final: %s", raw)
				assert.False(t, e.Fatal, raw)
			}
			assert.Equal(t, "bad_gateway", errs[0].Code)
			assert.Equal(t, "upstream restarting", errs[0].Message)
			publishN(t, ts, "p", 2)
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.receivedIds.length === 5`, chromedp.WithPollingTimeout(10*time.Second)))
			require.NoError(t, err, "and goes on live")
			ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]uint64](`window.receivedIds`))
			require.NoError(t, err)
			assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids)
		})
	}
}
