package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

var (
	browserFaults = flag.Int("browser.faults", len(faultKinds), "faults of TestBrowserFaultRun (make browser-faults runs 1,000)")
	browserSeed   = flag.Uint64("browser.seed", 0, "seed of TestBrowserFaultRun; 0 picks one (the test prints it)")
	browserTabs   = flag.Int("browser.tabs", 4, "tabs of TestBrowserFaultRun")
)

// faultKinds are the faults of TestBrowserFaultRun, each in turn first, then
// drawn at random.
var faultKinds = []string{
	"cut-mid-frame", // the stream drops now; the next answer is cut inside a frame
	"503",           // the stream drops; the next answer is 503 with Retry-After
	"429",           // same, 429
	"401",           // the token is rotated and the stream drops: a 401, a refresh
	"restart",       // a new incarnation (new epoch); sometimes 404 until its session exists
	"offline",       // the leader tab goes offline, its stream drops; online again
	"close-leader",  // the leader tab is closed; a new tab opens
	"reload",        // a tab reloads (its record and cursor live in sessionStorage)
	"show",          // another tab becomes the visible one of the window
	"freeze",        // a tab (sometimes the leader) is frozen, then resumed
	"cut",           // the stream drops between frames
	"hidden",        // a tab (often the leader) hidden for a minute: the stream cut meanwhile, every tab's clock 60 s on, shown again
	"cancel",        // a turn starts; every tab sees it (presence, turn_start); a tab's cancel() stops it; every tab sees it end
}

// Issue 31 item 3: a seeded run of faults with several tabs of one origin
// on a coalescing stream with presence (?presence=1&client=) while events
// are published: at the end every tab holds each event exactly once, in
// order, a merged frame's text is exactly its events', every gap is
// announced by a reset, every tab's presence is the server's, and one
// connection is open. Each cancel fault checks that every tab sees the
// turn start and end and that a tab's cancel() stops it (through a rotated
// token too). make test runs 13 faults (each kind once);
// make browser-faults runs 1,000 (-browser.faults, -browser.seed, -browser.tabs).
func TestBrowserFaultRun(t *testing.T) {
	seed := *browserSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./e2e -run TestBrowserFaultRun -browser.seed=%d -browser.faults=%d -browser.tabs=%d)", seed, seed, *browserFaults, *browserTabs)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	s := newBrowserServer(t, eventbus.Options{ReplayBufferSize: 1_000_000}, sse.HandlerOptions{Retry: 50 * time.Millisecond}, "coalesce=acp&client=run&presence=1")
	s.rotateToken()
	b := newHeadless(t, time.Duration(*browserFaults)*2*time.Second+2*time.Minute)
	defer b.close()
	opts := map[string]any{"tokenURL": "/token", "maxBackoff": 1000}
	pageURL := s.pageURL(opts)
	var tabs []*pageTab
	for range *browserTabs {
		tabs = append(tabs, b.open(pageURL))
	}

	// The publisher: an event every 10 ms until the run ends.
	stop := make(chan struct{})
	var pub sync.WaitGroup
	pub.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.publish(1)
			}
		}
	})
	stopPublishing := sync.OnceFunc(func() { close(stop); pub.Wait() })
	defer stopPublishing()

	var (
		counts    = map[string]int{}
		closed    [][][]any // records of closed tabs
		onlineLat []float64 // ms from 'online' to the leader's next open
		trace     []string  // the faults so far
		skew      int       // ms the tabs' clocks run ahead (hidden faults)
		cancelled int       // turns stopped by a tab's cancel()
		turnSeen  []float64 // ms from a turn's start until every tab knew it (rb.turn)
		endSeen   []float64 // ms from a cancel's answer until every tab knew the turn had ended
	)
	// allTabs waits until cond holds in every tab, or reports which do not.
	allTabs := func(within time.Duration, expr string) (time.Duration, []string) {
		start := time.Now()
		for {
			var not []string
			for _, tab := range tabs {
				if ok, err := eval[bool](tab, expr); err != nil || !ok {
					not = append(not, tab.name)
				}
			}
			if len(not) == 0 || time.Since(start) > within {
				return time.Since(start), not
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pause := func(lo, hi int) { time.Sleep(time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond) }
	for i := range *browserFaults {
		kind := faultKinds[i%len(faultKinds)]
		if i >= len(faultKinds) {
			kind = faultKinds[rng.IntN(len(faultKinds))]
		}
		counts[kind]++
		trace = append(trace, fmt.Sprintf("%d %s %s", i, time.Now().Format("15:04:05.000"), kind))
		switch kind {
		case "cut-mid-frame":
			s.plan(plannedAnswer{cutAfter: 1 + rng.IntN(900)})
			s.cutStreams()
		case "503", "429":
			status := map[string]int{"503": 503, "429": 429}[kind]
			ra := 0
			if i < len(faultKinds) || rng.IntN(4) == 0 {
				ra = 1
			}
			s.plan(plannedAnswer{status: status, retryAfter: ra})
			s.cutStreams()
		case "401":
			s.rotateToken()
			s.cutStreams()
		case "restart":
			after := time.Duration(0)
			if rng.IntN(2) == 0 {
				after = time.Duration(100+rng.IntN(700)) * time.Millisecond // 404 meanwhile
			}
			s.restart(after)
		case "offline":
			// From a quiet, open connection, so that the figure is the
			// reconnect's alone (not a planned answer's Retry-After).
			var leader *pageTab
			quiet := func() bool {
				s.mu.Lock()
				planned := len(s.planned)
				s.mu.Unlock()
				if leader = leaderOf(tabs); leader == nil {
					return false
				}
				st, err := eval[string](leader, `rb.status`)
				return planned == 0 && err == nil && st == "open"
			}
			for end := time.Now().Add(15 * time.Second); !quiet(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					dumpTabs(t, s, tabs)
					t.Logf("last faults: %s", strings.Join(lastN(trace, 20), "; "))
					t.Fatalf("fault %d: no open connection to take offline (seed %d)", i, seed)
				}
			}
			before, err := leader.view()
			require.NoError(t, err)
			require.NoError(t, setOffline(leader, true))
			s.cutStreams()
			pause(100, 600)
			require.NoError(t, setOffline(leader, false))
			reconnected := false
			for end := time.Now().Add(10 * time.Second); !reconnected && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				v, err := leader.view()
				if err == nil && len(v.T.Online) > len(before.T.Online) {
					on := v.T.Online[len(v.T.Online)-1]
					if j := slices.IndexFunc(v.T.Opens, func(x float64) bool { return x > on }); j >= 0 {
						onlineLat = append(onlineLat, v.T.Opens[j]-on)
						reconnected = true
					}
				}
			}
			assert.True(t, reconnected, "fault %d: the leader's stream open again within 10 s of 'online' (seed %d)", i, seed)
		case "close-leader":
			leader := leaderOf(tabs)
			if leader == nil {
				break
			}
			v, err := leader.view()
			require.NoError(t, err)
			closed = append(closed, v.Rec)
			leader.cancel()
			tabs = slices.DeleteFunc(tabs, func(x *pageTab) bool { return x == leader })
			tabs = append(tabs, b.open(pageURL))
		case "reload":
			tab := tabs[rng.IntN(len(tabs))]
			require.NoError(t, chromedp.Do(tab.ctx, chromedp.Reload()), "reloading %s", tab.name)
		case "show":
			require.NoError(t, activate(b, tabs[rng.IntN(len(tabs))]))
		case "freeze":
			tab := tabs[rng.IntN(len(tabs))]
			if rng.IntN(2) == 0 {
				if l := leaderOf(tabs); l != nil {
					tab = l
				}
			}
			require.NoError(t, freeze(tab, true))
			pause(100, 1500)
			require.NoError(t, freeze(tab, false))
		case "cut":
			s.cutStreams()
		case "hidden":
			// Only the active tab of a window is visible: another one is
			// made active, the stream cut while the tab is hidden (its timers
			// throttled), a minute passes on every tab's clock (Date.now:
			// backoff floors, Retry-After, the 404 grace and the online
			// window all read it), and the tab is shown again.
			tab := tabs[rng.IntN(len(tabs))]
			if rng.IntN(2) == 0 {
				if l := leaderOf(tabs); l != nil {
					tab = l
				}
			}
			other := tabs[(slices.Index(tabs, tab)+1+rng.IntN(len(tabs)-1))%len(tabs)]
			require.NoError(t, activate(b, other))
			pause(100, 800)
			s.cutStreams()
			pause(100, 800)
			skew += 60_000
			for _, x := range tabs {
				_, err := eval[bool](x, `setSkew(`+strconv.Itoa(skew)+`)`)
				require.NoError(t, err)
			}
			require.NoError(t, activate(b, tab))
		case "cancel":
			s.mu.Lock()
			inc := s.cur
			s.mu.Unlock()
			turn, err := inc.bus.StartTurn(context.Background(), browserSession, eventbus.TurnOptions{})
			if err != nil {
				break // a restarted server whose session is not there yet
			}
			inc.record(turn.Start().ID)
			require.NoError(t, turn.SetStatus("streaming"))
			took, not := allTabs(20*time.Second, `rb.turn === `+strconv.Quote(turn.ID())+` && rb.presence !== null && rb.presence.status === "streaming"`)
			assert.Empty(t, not, "fault %d: every tab sees turn %s running (seed %d)", i, turn.ID(), seed)
			turnSeen = append(turnSeen, float64(took.Milliseconds()))
			rotated := i < len(faultKinds) || rng.IntN(3) == 0
			if rotated {
				s.rotateToken() // the cancel's POST meets a 401 and refreshes the token
			}
			tab := tabs[rng.IntN(len(tabs))]
			if l := leaderOf(tabs); l != nil && i < len(faultKinds) {
				tab = l // make test's one cancel: a tab that holds a token, now stale
			}
			// A page asks for a token when it needs one and keeps it until
			// a 401: a tab that holds none fetches the current one, a tab
			// that holds an older one (this rotation's, or an earlier one
			// its stream never met) meets a 401 and refreshes it.
			held, err := eval[string](tab, `window.t.token || ""`)
			require.NoError(t, err)
			s.mu.Lock()
			posted := len(s.cancels)
			stale := held != "" && held != s.token
			if i < len(faultKinds) {
				assert.True(t, stale, "make test's cancel meets a stale token (seed %d)", seed)
			}
			s.mu.Unlock()
			answer, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`rb.cancel({cascade: true}).then((a) => JSON.stringify(a), (e) => JSON.stringify({error: e}))`, chromedp.EvalAwaitPromise))
			require.NoError(t, err)
			var res eventbus.CancelResult
			require.NoError(t, json.Unmarshal([]byte(answer), &res), answer)
			if !assert.Equal(t, []string{turn.ID()}, res.Cancelled, "fault %d: %s's cancel() stops the turn: %s (seed %d)", i, tab.name, answer, seed) {
				_, _ = turn.End(nil)
			}
			cancelled++
			s.mu.Lock()
			var statuses []int
			for _, c := range s.cancels[posted:] {
				statuses = append(statuses, c.status)
			}
			s.mu.Unlock()
			if stale {
				assert.Equal(t, []int{401, 200}, statuses, "fault %d: a stale token, refreshed by the token callback (seed %d)", i, seed)
			} else {
				assert.Equal(t, []int{200}, statuses, "fault %d (seed %d)", i, seed)
			}
			select {
			case <-turn.Context().Done():
			case <-time.After(5 * time.Second):
				t.Errorf("fault %d: the producer's context not cancelled (seed %d)", i, seed)
			}
			require.Eventually(t, func() bool { d, ok := inc.bus.Turn(browserSession, turn.ID()); return ok && d.EndID > 0 }, 5*time.Second, 5*time.Millisecond)
			d, _ := inc.bus.Turn(browserSession, turn.ID())
			var recs []uint64 // turn_start … turn_end: the cancel record and the end among the publisher's events
			inc.mu.Lock()
			for id := d.StartID; id <= d.EndID; id++ {
				if _, found := slices.BinarySearch(inc.ids, id); !found {
					recs = append(recs, id)
				}
			}
			inc.mu.Unlock()
			inc.record(recs...)
			took, not = allTabs(20*time.Second, `rb.turn === null && rb.presence !== null && rb.presence.status === "idle"`)
			assert.Empty(t, not, "fault %d: every tab sees turn %s end (seed %d)", i, turn.ID(), seed)
			endSeen = append(endSeen, float64(took.Milliseconds()))
		}
		pause(20, 200)
	}

	stopPublishing()
	s.publish(3) // the last events, once the session surely exists
	require.Eventually(t, func() bool { return s.publish(1) == 1 }, 5*time.Second, 20*time.Millisecond, "the last incarnation's session")
	waitCaughtUp(t, s, tabs, 60*time.Second)
	require.Eventually(t, func() bool { return s.active() == 1 }, 10*time.Second, 20*time.Millisecond, "one connection at the end")
	// Presence is state: every tab, leader or not, holds the server's.
	want, err := s.cur.bus.Presence(browserSession)
	require.NoError(t, err)
	for _, tab := range tabs {
		v, err := tab.view()
		require.NoError(t, err)
		if assert.NotNil(t, v.Presence, "%s has presence", tab.name) {
			assert.Equal(t, want.Session, v.Presence["session"], tab.name)
			assert.EqualValues(t, want.Clients, v.Presence["clients"], tab.name)
			assert.Equal(t, want.Status, v.Presence["status"], tab.name)
		}
		assert.Empty(t, v.Turn, "%s: no turn runs at the end", tab.name)
	}

	var total recordCheck
	add := func(c recordCheck) {
		total.events += c.events
		total.frames += c.frames
		total.merged += c.merged
		total.lost += c.lost
		total.dup += c.dup
		total.surfaced += c.surfaced
		total.resets += c.resets
	}
	for _, tab := range tabs {
		v, err := tab.view()
		require.NoError(t, err)
		c := s.checkRecord(v.Rec, true)
		add(c)
		assert.Empty(t, c.problems, "%s (seed %d)", tab.name, seed)
	}
	for i, rec := range closed {
		c := s.checkRecord(rec, false)
		add(c)
		assert.Empty(t, c.problems, "closed tab %d (seed %d)", i, seed)
	}

	// Retry-After is a floor: no request came sooner after a 503 or 429.
	reqs := s.requests()
	// Retry-After is a floor for the page that got it: its next request
	// came no sooner. (A page that leads next honours it too when the page
	// that got it could tell it — not when that page was frozen or closed
	// as the answer came; share.test.mjs in adapters/browser checks the
	// handover case itself.)
	var raChecked, raHandover int
	for i, r := range reqs[:len(reqs)-1] {
		if (r.status != 503 && r.status != 429) || r.retryAfter <= 0 {
			continue
		}
		j := slices.IndexFunc(reqs[i+1:], func(x streamRequest) bool { return x.tab == r.tab })
		if j < 0 || i+1+j != i+1 {
			raHandover++ // another page asked next: the leader changed
			if j < 0 {
				continue
			}
		}
		raChecked++
		next := reqs[i+1+j]
		gap := next.at.Sub(r.at)
		if !assert.GreaterOrEqual(t, gap, time.Duration(r.retryAfter)*time.Second, "request %d came %v after a %d with Retry-After %d, from the same page", i+1+j, gap, r.status, r.retryAfter) {
			t.Logf("around %s: faults %s", r.at.Format("15:04:05.000"), strings.Join(faultsBetween(trace, r.at.Add(-time.Second), next.at), "; "))
		}
	}
	// Each 401 is followed by a connect with another token that is let in.
	var unauthorized int
	for i, r := range reqs {
		if r.status != 401 {
			continue
		}
		unauthorized++
		j := slices.IndexFunc(reqs[i+1:], func(x streamRequest) bool { return x.status == 200 })
		if assert.GreaterOrEqual(t, j, 0, "a connect let in after the 401 of request %d", i) {
			assert.NotEqual(t, r.auth, reqs[i+1+j].auth, "request %d: a fresh token after the 401", i)
		}
	}
	if counts["401"] > 0 {
		assert.Positive(t, unauthorized, "the rotated token was refused at least once")
	}

	var cancel401 int
	s.mu.Lock()
	for _, c := range s.cancels {
		if c.status == http.StatusUnauthorized {
			cancel401++
		}
	}
	cancelPosts := len(s.cancels)
	s.mu.Unlock()
	sort.Float64s(turnSeen)
	sort.Float64s(endSeen)
	if len(turnSeen) > 0 {
		t.Logf("seed %d: %d turns cancelled from a tab (%d POSTs, %d of them 401 then refreshed); every tab saw the turn start in median %.0f ms (max %.0f), its end in median %.0f ms (max %.0f)",
			seed, cancelled, cancelPosts, cancel401, turnSeen[len(turnSeen)/2], turnSeen[len(turnSeen)-1], endSeen[len(endSeen)/2], endSeen[len(endSeen)-1])
	}
	if counts["cancel"] > 0 {
		assert.Positive(t, cancelled, "a cancel fault stopped a turn")
	}
	sort.Float64s(onlineLat)
	kinds := make([]string, 0, len(counts))
	for _, k := range faultKinds {
		if counts[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	lat := "none"
	if len(onlineLat) > 0 {
		lat = fmt.Sprintf("median %.0f ms, max %.0f ms over %d", onlineLat[len(onlineLat)/2], onlineLat[len(onlineLat)-1], len(onlineLat))
	}
	t.Logf("seed %d: %d faults (%s); %d tabs open at the end, %d closed; %d stream requests, %d Retry-After floors checked (%d of them with another page asking in between), %d 401s answered by a fresh token",
		seed, *browserFaults, strings.Join(kinds, ", "), len(tabs), len(closed), len(reqs), raChecked, raHandover, unauthorized)
	t.Logf("seed %d: events held %d in %d frames (%d merged); lost %d, duplicated %d; %d resets, %d events of ended incarnations announced by them; reconnect after online: %s",
		seed, total.events, total.frames, total.merged, total.lost, total.dup, total.resets, total.surfaced, lat)
	if t.Failed() {
		dumpTabs(t, s, tabs)
		t.Logf("last faults: %s", strings.Join(lastN(trace, 20), "; "))
	}
	assert.Zero(t, total.lost, "lost (seed %d)", seed)
	assert.Zero(t, total.dup, "duplicated (seed %d)", seed)
}

// dumpTabs logs each tab's connection and the server's last requests, for a
// failure's message.
func dumpTabs(t *testing.T, s *browserServer, tabs []*pageTab) {
	t.Helper()
	for _, tab := range tabs {
		v, err := tab.view()
		now, _ := eval[float64](tab, `performance.now()`)
		t.Logf("%s: leader %v, status %s, cursor %s, now %.0f, statuses %v, errors %v (%v)", tab.name, v.Leader, v.Status, v.Cursor, now, lastN(v.T.Status, 8), lastN(v.T.Errors, 4), err)
	}
	for _, r := range lastN(s.requests(), 30) {
		t.Logf("request %s %q %d", r.at.Format("15:04:05.000"), r.lastEventID, r.status)
	}
}

// faultsBetween returns the trace entries ("i hh:mm:ss.mmm kind") from lo
// to hi.
func faultsBetween(trace []string, lo, hi time.Time) []string {
	var out []string
	from, to := lo.Format("15:04:05.000"), hi.Format("15:04:05.000")
	for _, f := range trace {
		if at := strings.Fields(f)[1]; at >= from && at <= to {
			out = append(out, f)
		}
	}
	return out
}
