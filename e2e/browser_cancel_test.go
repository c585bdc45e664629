package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// replaybus.js's cancel() in Chromium, where no session or a custom
// cancelUrl is involved: on a many-sessions connection (GET /events, no
// session of its own) cancel() without a session rejects with
// {status: 0, code: "invalid_session_id"} and posts nothing (it posted
// to /session//cancel); cancel({session}) posts to that session's route;
// a string cancelUrl gets the session put in for {session} (it ignored
// the session argument), and one without {session} refuses another
// session than the connection's own rather than cancel the wrong one.
func TestBrowserCancelNamesItsSession(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	for _, s := range []string{"a", "b"} {
		require.NoError(t, bus.CreateSession(s, ""))
	}
	h, err := sse.NewHandler(bus, sse.HandlerOptions{Retry: 50 * time.Millisecond})
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		posts []string
	)
	answer := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"cancelled":[],"held":[]}`))
	}
	mux := http.NewServeMux()
	mux.Handle(browser.Pattern, browser.Handler{})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(browserPage)
	})
	mux.Handle(sse.ManyPattern, h)
	mux.Handle("GET /session/{id}/events", h)
	mux.HandleFunc("POST /session/{id}/cancel", answer)
	mux.HandleFunc("POST /x/{id}/stop", answer)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	defer func() { _ = h.Close() }()

	b := newHeadless(t, 60*time.Second)
	defer b.close()
	opts, err := json.Marshal(map[string]any{"sessions": []string{"a", "b"}, "persist": false})
	require.NoError(t, err)
	tab := b.open(ts.URL + "/page?url=" + url.QueryEscape("/events") + "&o=" + url.QueryEscape(string(opts)))
	require.Eventually(t, func() bool {
		n, err := eval[int](tab, `rb.sessions.length`)
		return err == nil && n == 2
	}, 20*time.Second, 20*time.Millisecond, "the many-sessions stream opens")

	call := func(expr string) map[string]any {
		t.Helper()
		raw, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`(async () => { try { return JSON.stringify({ok: await `+expr+`}); } catch (e) { return JSON.stringify({error: e}); } })()`, chromedp.EvalAwaitPromise))
		require.NoError(t, err, expr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &out), raw)
		return out
	}
	posted := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), posts...)
	}

	got := call(`rb.cancel({cascade: true})`)
	require.NotNil(t, got["error"], "cancel() without a session on a many-sessions connection: %v", got)
	e := got["error"].(map[string]any)
	assert.Equal(t, float64(0), e["status"])
	assert.Equal(t, "invalid_session_id", e["code"])
	assert.Contains(t, e["message"], "{session}")
	assert.Empty(t, posted(), "nothing posted")

	got = call(`rb.cancel({session: "b"})`)
	require.Nil(t, got["error"], "%v", got)
	assert.Equal(t, []string{"/session/b/cancel"}, posted())

	module := ts.URL + browser.Path
	got = call(`import("` + module + `").then((m) => { const c = m.connect("/session/a/events", {persist: false, shared: false, cancelUrl: "/x/{session}/stop"}); return Promise.all([c.cancel(), c.cancel({session: "b/1 é"})]).finally(() => c.close()); })`)
	require.Nil(t, got["error"], "%v", got)
	assert.ElementsMatch(t, []string{"/session/b/cancel", "/x/a/stop", "/x/b%2F1%20%C3%A9/stop"}, posted(), "the session put in for {session}, escaped (the two cancels race)")

	got = call(`import("` + module + `").then((m) => { const c = m.connect("/session/a/events", {persist: false, shared: false, cancelUrl: "/x/a/stop"}); return c.cancel({session: "b"}).finally(() => c.close()); })`)
	require.NotNil(t, got["error"], "a fixed cancelUrl and another session: %v", got)
	assert.Equal(t, "invalid_session_id", got["error"].(map[string]any)["code"])
	assert.Len(t, posted(), 3, "nothing posted to the other session's route")
}
