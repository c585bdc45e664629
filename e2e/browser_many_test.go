package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
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

// Issue 31 items 1 and 2: replaybus.js on a many-sessions connection in
// Chromium. The page connects to GET /events with {sessions: ["a",
// {session: "b", scope: "descendants"}]}; events of a, b and b's child
// arrive on one connection under one cursor, across cuts; rb.add("c")
// (POST /events/{conn}) brings c's history (ids below the connection's
// position: its catch-up) and its live events, across a cut; d, added
// with no history and cut before any event names it, is carried by the
// cursor of the session_added frame's id: line;
// rb.remove("a") stops a's events; an unknown session added is
// refused (404 naming it) and the others go on; after a server restart
// (a new epoch) the old cursor still carries the set: one reset per
// session, naming it, then the new epoch's events of the set. Per
// session: every event once, in order; the server holds one stream.
func TestBrowserManySessions(t *testing.T) {
	var (
		mu   sync.Mutex
		open = map[*faultWriter]struct{}{}
		gets int
		bus  *eventbus.Bus
		h    *sse.Handler
		old  []*eventbus.Bus
	)
	// incarnate starts a bus (a new epoch) with the sessions and its handler.
	incarnate := func() {
		b, err := eventbus.New(eventbus.Options{ReplayBufferSize: 100_000})
		require.NoError(t, err)
		for _, s := range [][2]string{{"a", ""}, {"b", ""}, {"b.1", "b"}, {"c", ""}, {"d", ""}} {
			require.NoError(t, b.CreateSession(s[0], s[1]))
		}
		nh, err := sse.NewHandler(b, sse.HandlerOptions{Retry: 50 * time.Millisecond})
		require.NoError(t, err)
		mu.Lock()
		if bus != nil {
			old = append(old, bus)
			_ = h.Close()
		}
		bus, h = b, nh
		mu.Unlock()
	}
	incarnate()
	handler := func() *sse.Handler {
		mu.Lock()
		defer mu.Unlock()
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(browser.Pattern, browser.Handler{})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(browserPage)
	})
	mux.HandleFunc(sse.ManyPattern, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		cw := &faultWriter{ResponseWriter: w, cancel: cancel}
		mu.Lock()
		open[cw] = struct{}{}
		gets++
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(open, cw)
			mu.Unlock()
		}()
		handler().ServeHTTP(cw, r.WithContext(ctx))
	})
	mux.HandleFunc(sse.ChangePattern, func(w http.ResponseWriter, r *http.Request) { handler().ServeHTTP(w, r) })
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = handler().Shutdown(ctx)
		ts.Close()
		for _, b := range append(old, bus) {
			_ = b.Close()
		}
	})
	cut := func() {
		mu.Lock()
		defer mu.Unlock()
		for cw := range open {
			cw.cutNow()
		}
	}
	published := map[string][]uint64{}
	var order []string // sessions in publish order, for the log
	publish := func(session string, n int) {
		for range n {
			ev, err := bus.Publish(session, "note", map[string]string{"s": session})
			require.NoError(t, err)
			published[session] = append(published[session], ev.ID)
			order = append(order, session)
		}
	}
	for range 5 {
		publish("a", 3)
		publish("b", 2)
		publish("b.1", 2)
		publish("c", 4)
	}

	b := newHeadless(t, 90*time.Second)
	defer b.close()
	opts, err := json.Marshal(map[string]any{"sessions": []any{"a", map[string]string{"session": "b", "scope": "descendants"}}, "persist": false})
	require.NoError(t, err)
	tab := b.open(ts.URL + "/page?url=" + url.QueryEscape("/events") + "&o=" + url.QueryEscape(string(opts)))

	// got returns the page's events by session, in arrival order.
	got := func() map[string][]uint64 {
		v, err := tab.view()
		require.NoError(t, err)
		out := map[string][]uint64{}
		for _, e := range v.Rec {
			if e[0] == "e" {
				s, _ := e[6].(string)
				out[s] = append(out[s], uint64(e[3].(float64)))
			}
		}
		return out
	}
	has := func(want map[string][]uint64) func() bool {
		return func() bool {
			g := got()
			for s, ids := range want {
				if len(g[s]) < len(ids) {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, has(map[string][]uint64{"a": published["a"], "b": published["b"], "b.1": published["b.1"]}), 20*time.Second, 20*time.Millisecond, "the set's history")

	// Live events across cuts, one connection.
	for i := range 4 {
		publish("a", 2)
		publish("b.1", 1)
		publish("c", 1) // not in the set
		cut()
		publish("b", 2)
		if i%2 == 0 {
			cut()
		}
	}
	require.Eventually(t, has(map[string][]uint64{"a": published["a"], "b": published["b"], "b.1": published["b.1"]}), 20*time.Second, 20*time.Millisecond, "the live events after cuts")
	require.Equal(t, 1, handler().Stats().Active, "one stream for the set")

	// Add c: its history comes (ids below the connection's position), then
	// a cut before any later event: the reconnect still carries c.
	raw, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`rb.add("c").then((a) => JSON.stringify(a), (e) => JSON.stringify({error: e}))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var added struct {
		Sessions []map[string]string
		Cursor   string
		Error    map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &added), raw)
	require.Nil(t, added.Error, raw)
	assert.Contains(t, added.Sessions, map[string]string{"session": "c", "scope": "session"}, raw)
	require.Eventually(t, has(map[string][]uint64{"c": published["c"]}), 20*time.Second, 20*time.Millisecond, "c's history after the add")
	cursor, err := eval[string](tab, `rb.cursor`)
	require.NoError(t, err)
	assert.Contains(t, cursor, ";+c:session", "the cursor names the added session")
	cut()
	publish("c", 3)
	publish("a", 1)
	require.Eventually(t, has(map[string][]uint64{"c": published["c"], "a": published["a"]}), 20*time.Second, 20*time.Millisecond, "c's live events after a cut")

	// Add d, which has no event yet, and cut before any event of the new
	// set: only the cursor of the session_added frame carries d across the
	// reconnect.
	_, err = chromedp.Run(tab.ctx, chromedp.Evaluate[bool](`rb.add("d").then(() => true)`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := eval[string](tab, `rb.sessions.some((x) => x.session === "d") ? rb.cursor : ""`)
		return err == nil && strings.Contains(c, ";+d:session")
	}, 10*time.Second, 10*time.Millisecond, "the session_added frame, and d in the cursor")
	cut()
	publish("d", 2)
	require.Eventually(t, has(map[string][]uint64{"d": published["d"]}), 20*time.Second, 20*time.Millisecond, "d's events after a cut before any event of the new set")

	// An unknown session: refused, naming it; the set goes on.
	raw, err = chromedp.Run(tab.ctx, chromedp.Evaluate[string](`rb.add("nope").then((a) => JSON.stringify(a), (e) => JSON.stringify(e))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Contains(t, raw, `"status":404`)
	assert.Contains(t, raw, `"code":"session_not_found"`)
	assert.Contains(t, raw, "nope")

	// Remove a: no event of it after the answer.
	raw, err = chromedp.Run(tab.ctx, chromedp.Evaluate[string](`rb.remove("a").then((a) => JSON.stringify(a), (e) => JSON.stringify({error: e}))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.NotContains(t, raw, "error", raw)
	aBefore := len(published["a"])
	publish("a", 3)
	publish("b", 1)
	publish("c", 1)
	cut()
	publish("b.1", 1)
	require.Eventually(t, has(map[string][]uint64{"b": published["b"], "b.1": published["b.1"], "c": published["c"]}), 20*time.Second, 20*time.Millisecond, "the set without a")
	time.Sleep(200 * time.Millisecond)

	g := got()
	assert.Equal(t, published["a"][:aBefore], g["a"], "a: every event until its removal, once, in order")
	for _, s := range []string{"b", "b.1", "c", "d"} {
		assert.Equal(t, published[s], g[s], "%s: every event once, in order", s)
	}
	var all []uint64
	before := map[string]int{}
	for s, ids := range g {
		before[s] = len(ids)
		all = append(all, ids...)
	}
	slices.Sort(all)
	assert.Equal(t, len(all), len(slices.Compact(all)), "no id twice")
	v, err := tab.view()
	require.NoError(t, err)
	recBefore := len(v.Rec)

	// A restart: a new epoch, ids from 1 again. The cursor of the old
	// epoch still carries the set (+c, +d, -a): the new server resets each
	// session of it by name and replays its history.
	oldEpoch := bus.Epoch()
	incarnate()
	require.NotEqual(t, oldEpoch, bus.Epoch())
	cut()
	after := map[string][]uint64{}
	for _, s := range []string{"a", "b", "b.1", "c", "d"} {
		for range 2 {
			ev, err := bus.Publish(s, "note", map[string]string{"s": s})
			require.NoError(t, err)
			after[s] = append(after[s], ev.ID)
		}
	}
	require.Eventually(t, func() bool {
		g := got()
		for _, s := range []string{"b", "b.1", "c", "d"} {
			if len(g[s]) < before[s]+2 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the new epoch's events of the set")
	time.Sleep(200 * time.Millisecond)
	v, err = tab.view()
	require.NoError(t, err)
	var resets []string
	newEvents := map[string][]uint64{}
	for _, e := range v.Rec[recBefore:] {
		switch e[0] {
		case "r":
			require.Equal(t, "epoch_reset", e[1], "%v", e)
			require.Equal(t, bus.Epoch(), e[2], "%v", e)
			resets = append(resets, e[3].(string))
		case "e":
			require.NotEmpty(t, resets, "an event of the new epoch before any reset: %v", e)
			newEvents[e[6].(string)] = append(newEvents[e[6].(string)], uint64(e[3].(float64)))
		}
	}
	assert.Subset(t, resets, []string{"b", "c", "d"}, "a reset names each session of the set")
	assert.NotContains(t, resets, "a")
	assert.Empty(t, newEvents["a"], "a, removed before the restart, stays out")
	for _, s := range []string{"b", "b.1", "c", "d"} {
		assert.Equal(t, after[s], newEvents[s], "%s: the new epoch's events once, in order", s)
	}
	var set []string
	for _, f := range v.T.Set {
		set = append(set, strings.Join(f, ":"))
	}
	assert.Contains(t, set, "session_added:c:", "the add's frame")
	assert.Contains(t, set, "session_removed:a:", "the remove's frame")
	sessions, err := eval[[]map[string]string](tab, `rb.sessions`)
	require.NoError(t, err)
	assert.ElementsMatch(t, []map[string]string{{"session": "b", "scope": "descendants"}, {"session": "c", "scope": "session"}, {"session": "d", "scope": "session"}}, sessions)
	assert.Equal(t, 1, handler().Stats().Active, "one stream")
	mu.Lock()
	t.Logf("many sessions: %d events in %d sessions over one connection before the restart (%d GETs in all), cursor %s", len(all), len(g), gets, v.Cursor)
	mu.Unlock()
}
