package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// Issue 31: eight tabs of one origin hold exactly one server connection
// (the SSE handler's Stats say so), all live; the leader tab closed, another
// takes over and no tab loses or repeats an event.
func TestBrowserTabsShareOneConnection(t *testing.T) {
	s := newBrowserServer(t, eventbus.Options{ReplayBufferSize: 100_000}, sse.HandlerOptions{Retry: 100 * time.Millisecond}, "")
	b := newHeadless(t, 90*time.Second)
	defer b.close()

	pageURL := s.pageURL(map[string]any{})
	var tabs []*pageTab
	for i := range 8 {
		s.publish(5 + i) // each tab opens in the middle of the stream
		tabs = append(tabs, b.open(pageURL))
	}
	s.publish(20)
	waitCaughtUp(t, s, tabs, 30*time.Second)
	assert.Equal(t, 1, s.active(), "eight tabs, one connection")
	leader := leaderOf(tabs)
	require.NotNil(t, leader)
	started := s.cur.sse.Stats().Started
	t.Logf("8 tabs: %d stream open, %d started in all (tabs joining behind the leader's position may restart it once)", s.active(), started)

	// The leader goes; a new tab comes.
	closed, err := leader.view()
	require.NoError(t, err)
	s.publish(10)
	leader.cancel()
	tabs = slices.DeleteFunc(tabs, func(x *pageTab) bool { return x == leader })
	s.publish(10)
	tabs = append(tabs, b.open(pageURL))
	s.publish(10)
	waitCaughtUp(t, s, tabs, 30*time.Second)
	require.Eventually(t, func() bool { return s.active() == 1 }, 10*time.Second, 20*time.Millisecond, "one connection after the handover")
	assert.NotNil(t, leaderOf(tabs))

	for _, tab := range tabs {
		v, err := tab.view()
		require.NoError(t, err)
		c := s.checkRecord(v.Rec, true)
		assert.Empty(t, c.problems, tab.name)
		assert.Zero(t, c.lost+c.dup, tab.name)
		assert.Equal(t, len(s.cur.ids), c.events, "%s holds every event once", tab.name)
		assert.Equal(t, "open", v.Status, tab.name)
	}
	c := s.checkRecord(closed.Rec, false)
	assert.Empty(t, c.problems, "the closed leader's record")
}

// Issue 31: a snapshot, then exactly the events after it — for a new tab
// asking with ?snapshot=1, and after a restart whose new history the
// server's buffer no longer holds whole: the reset (epoch_reset, always
// first), then the new incarnation's snapshot and its tail.
func TestBrowserSnapshotThenTail(t *testing.T) {
	var s *browserServer
	snapshots := func(ctx context.Context, session string, sc scope.Kind) (json.RawMessage, uint64, error) {
		s.mu.Lock()
		inc := s.cur
		s.mu.Unlock()
		inc.mu.Lock()
		defer inc.mu.Unlock()
		var last uint64
		if len(inc.ids) > 0 {
			last = inc.ids[len(inc.ids)-1]
		}
		b, err := json.Marshal(map[string]any{"asOf": last})
		return b, last, err
	}
	s = newBrowserServer(t, eventbus.Options{ReplayBufferSize: 8, Snapshots: snapshots}, sse.HandlerOptions{Retry: 100 * time.Millisecond}, "snapshot=1")
	b := newHeadless(t, 60*time.Second)
	defer b.close()

	s.publish(12)
	tab := b.open(s.pageURL(map[string]any{}))
	require.Eventually(t, func() bool {
		n, err := eval[int](tab, `window.rec.length`)
		return err == nil && n > 0
	}, 20*time.Second, 10*time.Millisecond, "the snapshot")
	s.publish(5)
	waitCaughtUp(t, s, []*pageTab{tab}, 20*time.Second)
	v, err := tab.view()
	require.NoError(t, err)
	epoch := s.cur.bus.Epoch()
	require.NotEmpty(t, v.Rec)
	assert.Equal(t, []any{"s", epoch + "-12", "requested"}, v.Rec[0], "the snapshot first")
	var ids []uint64
	for _, e := range v.Rec[1:] {
		require.Equal(t, "e", e[0])
		ids = append(ids, uint64(e[3].(float64)))
	}
	assert.Equal(t, []uint64{13, 14, 15, 16, 17}, ids, "then exactly the events after it")

	s.restartWith(0, 12) // twelve events, eight of them in the buffer, before the tab is back
	s.publish(2)
	waitCaughtUp(t, s, []*pageTab{tab}, 20*time.Second)
	v, err = tab.view()
	require.NoError(t, err)
	tail := v.Rec[len(ids)+1:]
	newEpoch := s.cur.bus.Epoch()
	require.GreaterOrEqual(t, len(tail), 2, "%v", tail)
	assert.Equal(t, []any{"r", "epoch_reset", newEpoch, browserSession}, tail[0], "the restart first, naming its session")
	require.Equal(t, "s", tail[1][0], "then the new incarnation's snapshot: %v", tail)
	cursor, _ := tail[1][1].(string)
	require.True(t, strings.HasPrefix(cursor, newEpoch+"-"), "snapshot cursor %s", cursor)
	assert.Equal(t, "epoch_reset", tail[1][2])
	asOf, err := strconv.ParseUint(strings.TrimPrefix(cursor, newEpoch+"-"), 10, 64)
	require.NoError(t, err)
	ids = nil
	for _, e := range tail[2:] {
		require.Equal(t, "e", e[0])
		ids = append(ids, uint64(e[3].(float64)))
	}
	var want []uint64
	for id := asOf + 1; id <= 14; id++ {
		want = append(want, id)
	}
	assert.Equal(t, want, ids, "then exactly the new incarnation's events after %d", asOf)
}

// Issue 31: reconnect within 1 s of the online event. The leader tab goes
// offline and its stream is cut; the server's retry: is 20 s, so the
// module's own backoff would wait at least 10 s: a connection open soon
// after 'online' is the online handler's doing. The figures (online → open,
// in the page's clock) are logged; the bound asserted is the backoff's.
// A second kind of round leaves the stream silent instead of cutting it:
// nothing read since 'offline', the module takes it for dead.
func TestBrowserReconnectsAfterOnline(t *testing.T) {
	s := newBrowserServer(t, eventbus.Options{ReplayBufferSize: 10_000}, sse.HandlerOptions{Retry: 20 * time.Second}, "")
	b := newHeadless(t, 90*time.Second)
	defer b.close()
	tabs := []*pageTab{b.open(s.pageURL(map[string]any{})), b.open(s.pageURL(map[string]any{}))}
	s.publish(5)
	waitCaughtUp(t, s, tabs, 20*time.Second)

	var lat []float64
	for round := range 4 {
		leader := leaderOf(tabs)
		require.NotNil(t, leader)
		before, err := leader.view()
		require.NoError(t, err)
		require.NoError(t, setOffline(leader, true))
		cut := round%2 == 0
		if cut {
			s.cutStreams()
			s.publish(3) // published while the leader is offline
		}
		time.Sleep(700 * time.Millisecond)
		require.NoError(t, setOffline(leader, false))
		var after pageView
		require.Eventually(t, func() bool {
			after, err = leader.view()
			return err == nil && len(after.T.Online) > len(before.T.Online) && len(after.T.Opens) > len(before.T.Opens)
		}, 8*time.Second, 10*time.Millisecond, "round %d: the stream opens again after 'online' (cut %v)", round, cut)
		online := after.T.Online[len(after.T.Online)-1]
		open := after.T.Opens[len(after.T.Opens)-1]
		require.Greater(t, open, online, "round %d: the open follows the online event", round)
		lat = append(lat, open-online)
		s.publish(2)
		waitCaughtUp(t, s, tabs, 20*time.Second)
	}
	slices.Sort(lat)
	t.Logf("reconnect after 'online' (ms, page clock, 4 rounds, sorted): %v; median %.0f, max %.0f", fmtMs(lat), lat[len(lat)/2], lat[len(lat)-1])
	for _, tab := range tabs {
		v, err := tab.view()
		require.NoError(t, err)
		c := s.checkRecord(v.Rec, true)
		assert.Empty(t, c.problems, tab.name)
	}
}

func fmtMs(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

// The example server serves the module at GET /replaybus.js, as the
// library's handler does: JavaScript, revalidated with its ETag.
func TestExampleServerServesTheModule(t *testing.T) {
	t.Parallel()
	ts := startServer(t, eventbus.Options{}, server.Options{})
	resp, err := http.Get(ts.ts.URL + browser.Path)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, browser.Script(), body)

	req, err := http.NewRequest(http.MethodGet, ts.ts.URL+browser.Path, nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	again.Body.Close()
	assert.Equal(t, http.StatusNotModified, again.StatusCode)
}
