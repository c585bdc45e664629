package eventbustest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

func cases() []testCase {
	return []testCase{
		{"HistoryBeforeLive", historyBeforeLive},
		{"SubscribeRacingPublish", subscribeRacingPublish},
		{"ResumeTable", resumeTable},
		{"ScopesLive", scopesLive},
		{"ScopesReplay", scopesReplay},
		{"CloseSession", closeSession},
		{"TreeLifecycle", treeLifecycle},
		{"ConcurrentPublishers", concurrentPublishers},
		{"SlowConsumerEvicted", slowConsumerEvicted},
		{"SlowConsumerDropNewest", slowConsumerDropNewest},
		{"BusClose", busClose},
		{"Turns", turns},
	}
}

// historyBeforeLive: the replayed history (Replay=true) comes first, then
// the live events, each once.
func historyBeforeLive(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	hist := publish(t, b, "s1", "msg", 5)
	s.syncBus(t, b)
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{})
	live := publish(t, b, "s1", "msg", 5)
	assert.Equal(t, hist, s.ids(t, sub, 5, true))
	assert.Equal(t, live, s.ids(t, sub, 5, false))
	s.syncBus(t, b)
	quiet(t, sub)
	assert.Zero(t, b.Stats().Guarded, "reinsert guard")
}

// subscribeRacingPublish: subscribes (without and with a cursor) while a
// publisher runs get a gap-free, duplicate-free suffix of what was
// published: history, then live, in id order.
func subscribeRacingPublish(t *testing.T, s *suite) {
	const n = 300
	b := s.newBus(t, eventbus.Options{ReplayBufferSize: 1000, MaxQueueSize: 10 * n})
	var (
		mu        sync.Mutex
		published []uint64
	)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			ev, err := b.Publish("race", "msg", i)
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			published = append(published, ev.ID)
			mu.Unlock()
			if i == n/3 {
				close(started)
			}
		}
		done <- nil
	}()
	<-started
	plain := subscribe(t, b, "race", eventbus.SubscribeOptions{})
	mu.Lock()
	cursor := published[n/6]
	mu.Unlock()
	resumed := subscribe(t, b, "race", eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
	require.NoError(t, <-done)
	last := published[n-1]

	read := func(sub *eventbus.Subscription, withComplete bool) []uint64 {
		var got []uint64
		replaying, completed := true, !withComplete
		for len(got) == 0 || got[len(got)-1] < last || !completed {
			ev := s.next(t, sub)
			if ev.ID == 0 {
				require.Equal(t, frame.TypeReplayComplete, ev.Type, "%s", ev.Data)
				require.False(t, completed, "second replay_complete")
				completed, replaying = true, false
				continue
			}
			if !ev.Replay {
				replaying = false
			}
			require.Equal(t, replaying, ev.Replay, "replayed id %d after a live one", ev.ID)
			got = append(got, ev.ID)
		}
		require.True(t, completed, "no replay_complete")
		return got
	}
	got := read(plain, false)
	require.NotEmpty(t, got)
	i := indexOf(published, got[0])
	require.GreaterOrEqual(t, i, 0, "first id %d was never published", got[0])
	assert.Equal(t, published[i:], got, "not a gap-free suffix of the published ids")

	got = read(resumed, true)
	assert.Equal(t, published[n/6+1:], got, "resume from %d", cursor)
	assert.Zero(t, b.Stats().Guarded, "reinsert guard")
}

func indexOf(ids []uint64, id uint64) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// resumeTable: a ring of 5 holding events 8…12 of 12, resumed from cursors
// 7, 3, 12, past the next id and from another epoch.
func resumeTable(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{ReplayBufferSize: 5})
	e := publish(t, b, "r", "msg", 12)
	s.syncBus(t, b)
	ring := e[7:] // events 8…12
	type want struct {
		resync      string // "" when none
		earliest    uint64
		replayed    []uint64
		lastReplay  uint64
		lastDeliver uint64
	}
	for _, c := range []struct {
		name   string
		cursor uint64
		epoch  string
		want   want
	}{
		{"cursor 7 in ring", e[6], "", want{replayed: ring, lastReplay: e[11]}},
		{"cursor 7 same epoch", e[6], b.Epoch(), want{replayed: ring, lastReplay: e[11]}},
		{"cursor 3 evicted", e[2], "", want{resync: frame.ReasonRingEvicted, earliest: e[7], lastDeliver: e[2], replayed: ring, lastReplay: e[11]}},
		{"cursor 12 at end", e[11], "", want{lastReplay: e[11]}},
		{"cursor next", e[11] + 1, "", want{resync: frame.ReasonEpochReset, lastDeliver: e[11] + 1, replayed: ring, lastReplay: e[11]}},
		{"cursor far ahead", e[11] + 1000, "", want{resync: frame.ReasonEpochReset, lastDeliver: e[11] + 1000, replayed: ring, lastReplay: e[11]}},
		{"other epoch", e[6], "otherEpoch0", want{resync: frame.ReasonEpochReset, lastDeliver: e[6], replayed: ring, lastReplay: e[11]}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := subscribe(t, b, "r", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: c.cursor, Epoch: c.epoch}})
			if c.want.resync != "" {
				var d frame.ResyncData
				s.frame(t, sub, frame.TypeStateResyncRequired, &d)
				assert.Equal(t, c.want.resync, d.Reason)
				assert.Equal(t, c.want.lastDeliver, d.LastDeliveredID)
				if c.want.resync == frame.ReasonRingEvicted {
					assert.Equal(t, c.want.earliest, d.CompleteFromID)
				} else {
					assert.Equal(t, b.Epoch(), d.Epoch)
				}
			}
			got := s.ids(t, sub, len(c.want.replayed), true)
			assert.Equal(t, append([]uint64{}, c.want.replayed...), got)
			var rc frame.ReplayCompleteData
			s.frame(t, sub, frame.TypeReplayComplete, &rc)
			assert.Equal(t, c.want.lastReplay, rc.LastReplayedEventID)
			assert.Equal(t, len(c.want.replayed), rc.ReplayedCount)
			quiet(t, sub)
		})
	}
	// A resumed subscriber goes on live.
	sub := subscribe(t, b, "r", eventbus.SubscribeOptions{Cursor: eventbus.At(e[11])})
	s.frame(t, sub, frame.TypeReplayComplete, nil)
	more := publish(t, b, "r", "msg", 2)
	assert.Equal(t, more, s.ids(t, sub, 2, false))
}

// tree makes root ─┬─ a ── a1
//
//	└─ b
func tree(t *testing.T, b *eventbus.Bus) {
	require.NoError(t, b.CreateSession("root", ""))
	require.NoError(t, b.CreateSession("a", "root"))
	require.NoError(t, b.CreateSession("b", "root"))
	require.NoError(t, b.CreateSession("a1", "a"))
}

// publishTree publishes to every session of tree in turn and returns the
// ids per session and all of them in order.
func publishTree(t *testing.T, b *eventbus.Bus, rounds int) (map[string][]uint64, []uint64) {
	per := map[string][]uint64{}
	var all []uint64
	for i := 0; i < rounds; i++ {
		for _, sess := range []string{"root", "a", "b", "a1"} {
			id := publish(t, b, sess, "msg", 1)[0]
			per[sess] = append(per[sess], id)
			all = append(all, id)
		}
	}
	return per, all
}

// expectScopes lists, for subscribers made on "a", the sessions each scope
// hears.
var expectScopes = []struct {
	kind     scope.Kind
	sessions []string
}{
	{scope.Session, []string{"a"}},
	{scope.Descendants, []string{"a", "a1"}},
	{scope.Subtree, []string{"a", "root", "b"}}, // self, parent, siblings (AgentPool)
	{scope.All, []string{"root", "a", "b", "a1"}},
}

func merge(per map[string][]uint64, all []uint64, sessions []string) []uint64 {
	in := map[uint64]bool{}
	for _, s := range sessions {
		for _, id := range per[s] {
			in[id] = true
		}
	}
	var out []uint64
	for _, id := range all {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

// scopesLive: live subscribers of each scope on "a" hear exactly their
// sessions, in id order.
func scopesLive(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	tree(t, b)
	s.syncBus(t, b)
	subs := make([]*eventbus.Subscription, len(expectScopes))
	for i, sc := range expectScopes {
		subs[i] = subscribe(t, b, "a", eventbus.SubscribeOptions{Scope: sc.kind})
	}
	per, all := publishTree(t, b, 3)
	s.syncBus(t, b)
	for i, sc := range expectScopes {
		want := merge(per, all, sc.sessions)
		assert.Equal(t, want, s.ids(t, subs[i], len(want), false), "scope %v", sc.kind)
		quiet(t, subs[i])
	}
}

// scopesReplay: the same, replayed and merged by id from a cursor.
func scopesReplay(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	tree(t, b)
	per, all := publishTree(t, b, 3)
	s.syncBus(t, b)
	cursor := all[2]
	for _, sc := range expectScopes {
		sub := subscribe(t, b, "a", eventbus.SubscribeOptions{Scope: sc.kind, Cursor: eventbus.At(cursor)})
		var want []uint64
		for _, id := range merge(per, all, sc.sessions) {
			if id > cursor {
				want = append(want, id)
			}
		}
		assert.Equal(t, want, s.ids(t, sub, len(want), true), "scope %v", sc.kind)
		var rc frame.ReplayCompleteData
		s.frame(t, sub, frame.TypeReplayComplete, &rc)
		assert.Equal(t, len(want), rc.ReplayedCount)
	}
}

// closeSession: the session's subscribers get session_closed (a real
// event) and end with ErrSessionClosed; a descendants subscriber of its
// parent gets it and goes on; the closed session refuses publishes and
// subscribes.
func closeSession(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("p", ""))
	require.NoError(t, b.CreateSession("c", "p"))
	s.syncBus(t, b)
	own := subscribe(t, b, "c", eventbus.SubscribeOptions{})
	desc := subscribe(t, b, "p", eventbus.SubscribeOptions{Scope: scope.Descendants})
	ids := publish(t, b, "c", "msg", 2)
	require.NoError(t, b.CloseSession("c"))
	s.syncBus(t, b)

	for _, sub := range []*eventbus.Subscription{own, desc} {
		assert.Equal(t, ids, s.ids(t, sub, 2, false))
		ev := s.next(t, sub)
		assert.Equal(t, frame.TypeSessionClosed, ev.Type)
		assert.Greater(t, ev.ID, ids[1], "session_closed has an id")
		assert.Equal(t, "c", ev.Session)
	}
	s.ended(t, own, eventbus.ErrSessionClosed)
	assert.ErrorIs(t, own.Err(), eventbus.ErrSessionClosed)

	_, err := b.Publish("c", "msg", 1)
	assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
	_, err = b.Subscribe(context.Background(), "c", eventbus.SubscribeOptions{})
	assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.NoError(t, b.CloseSession("c"), "closing twice")
	assert.False(t, b.SessionExists("c"))

	more := publish(t, b, "p", "msg", 1)
	assert.Equal(t, more, s.ids(t, desc, 1, false), "descendants subscriber goes on")
}

// treeLifecycle: closing a middle session moves its children up (a
// descendants subscriber of the grandparent keeps hearing them); a root
// that already published is attached late and its history joins the
// ancestors' descendants replay merged by id; a closed id is reopened and a
// resume of it from before the close loses nothing while its buffer is
// kept.
func treeLifecycle(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("g", ""))
	require.NoError(t, b.CreateSession("p", "g"))
	require.NoError(t, b.CreateSession("c", "p"))
	s.syncBus(t, b)
	desc := subscribe(t, b, "g", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	early := publish(t, b, "c", "msg", 1)
	pEvents := publish(t, b, "p", "msg", 1)
	require.NoError(t, b.CloseSession("p"))
	s.syncBus(t, b)
	closed := b.LastEventID()
	late := publish(t, b, "c", "msg", 1)
	s.syncBus(t, b)
	assert.Equal(t, []uint64{early[0], pEvents[0], closed, late[0]}, s.ids(t, desc, 4, false), "the tree stayed connected")

	r := publish(t, b, "r", "msg", 1) // a root that published before its link is known
	// A distributed bus attaches r on this node at once, and its feed may
	// ingest r's first event only after that: then that event is live for
	// g's subscribers too (in order, once). Wait for the feed so that the
	// case checks the same thing on every bus: what follows the attach.
	s.syncBus(t, b)
	require.NoError(t, b.CreateSession("r", "g"))
	s.syncBus(t, b)
	rLive := publish(t, b, "r", "msg", 1)
	s.syncBus(t, b)
	assert.Equal(t, rLive, s.ids(t, desc, 1, false), "attached late: its events reach g's descendants")
	fresh := subscribe(t, b, "g", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	want := []uint64{early[0], pEvents[0], closed, late[0], r[0], rLive[0]}
	assert.Equal(t, want, s.ids(t, fresh, len(want), true), "merged by id, the closed p's history kept")
	s.frame(t, fresh, frame.TypeReplayComplete, nil)

	require.NoError(t, b.CreateSession("p", "g"), "reopen")
	s.syncBus(t, b)
	again := publish(t, b, "p", "msg", 1)
	s.syncBus(t, b)
	resumed := subscribe(t, b, "p", eventbus.SubscribeOptions{Cursor: eventbus.At(early[0])})
	assert.Equal(t, []uint64{pEvents[0], closed, again[0]}, s.ids(t, resumed, 3, true), "the reopened p took its history back")
	s.frame(t, resumed, frame.TypeReplayComplete, nil)
}

// concurrentPublishers: four publishers into one session tree; every
// subscriber sees its ids strictly increasing, each once, none missing.
func concurrentPublishers(t *testing.T, s *suite) {
	const workers, per = 4, 150
	b := s.newBus(t, eventbus.Options{MaxQueueSize: 10 * workers * per, ReplayBufferSize: 2 * per})
	require.NoError(t, b.CreateSession("t", ""))
	kids := []string{"t0", "t1", "t2", "t3"}
	for _, k := range kids {
		require.NoError(t, b.CreateSession(k, "t"))
	}
	s.syncBus(t, b)
	all := subscribe(t, b, "t", eventbus.SubscribeOptions{Scope: scope.All})
	desc := subscribe(t, b, "t", eventbus.SubscribeOptions{Scope: scope.Descendants})
	one := subscribe(t, b, "t2", eventbus.SubscribeOptions{})
	var wg sync.WaitGroup
	got := make([][]uint64, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				ev, err := b.Publish(kids[w], "msg", i)
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], ev.ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	set := map[uint64]bool{}
	for _, ids := range got {
		increasing(t, ids)
		for _, id := range ids {
			require.False(t, set[id], "id %d given twice", id)
			set[id] = true
		}
	}
	check := func(sub *eventbus.Subscription, want map[uint64]bool) {
		ids := s.ids(t, sub, len(want), false)
		increasing(t, ids)
		for _, id := range ids {
			assert.True(t, want[id], "unexpected id %d", id)
		}
	}
	check(all, set)
	check(desc, set)
	t2 := map[uint64]bool{}
	for _, id := range got[2] {
		t2[id] = true
	}
	check(one, t2)
	s.syncBus(t, b)
	quiet(t, all)
	quiet(t, one)
}

// slowConsumerEvicted: a subscriber that does not read is warned at 75 %
// of its queue and evicted at 100 % with client_evicted naming the first
// event it did not get, then resumes from the ring.
func slowConsumerEvicted(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{MaxQueueSize: 4, OverflowPolicy: eventbus.DropSubscriber})
	sub := subscribe(t, b, "slow", eventbus.SubscribeOptions{})
	e := publish(t, b, "slow", "msg", 10)
	s.syncBus(t, b)
	assert.Equal(t, e[:3], s.ids(t, sub, 3, false))
	s.frame(t, sub, frame.TypeSlowClientWarning, nil)
	assert.Equal(t, e[3:4], s.ids(t, sub, 1, false))
	var ce frame.ClientEvictedData
	s.frame(t, sub, frame.TypeClientEvicted, &ce)
	assert.Equal(t, frame.ReasonQueueOverflow, ce.Reason)
	assert.Equal(t, e[4], ce.DroppedAfter)
	s.ended(t, sub, eventbus.ErrEvicted)
	assert.EqualValues(t, 1, b.Stats().Evicted)

	again := subscribe(t, b, "slow", eventbus.SubscribeOptions{Cursor: eventbus.At(e[3])})
	assert.Equal(t, e[4:], s.ids(t, again, 6, true))
	s.frame(t, again, frame.TypeReplayComplete, nil)
}

// slowConsumerDropNewest: under drop_newest the overflow is dropped and
// announced with one events_dropped frame; the subscriber stays.
func slowConsumerDropNewest(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{MaxQueueSize: 4, OverflowPolicy: eventbus.DropNewest, DisableSlowClientWarning: true})
	sub := subscribe(t, b, "slow", eventbus.SubscribeOptions{})
	e := publish(t, b, "slow", "msg", 10)
	s.syncBus(t, b)
	assert.Equal(t, e[:4], s.ids(t, sub, 4, false))
	var d frame.ResyncData
	s.frame(t, sub, frame.TypeStateResyncRequired, &d)
	assert.Equal(t, frame.ReasonEventsDropped, d.Reason)
	assert.Equal(t, e[3], d.LastDeliveredID)
	assert.Equal(t, e[4], d.FirstDroppedID)
	assert.Equal(t, e[9], d.LastDroppedID)
	assert.Equal(t, 6, d.DroppedCount)
	more := publish(t, b, "slow", "msg", 1)
	assert.Equal(t, more, s.ids(t, sub, 1, false))
}

// busClose: Close ends every subscription with ErrClosed, later calls fail
// with ErrClosed, and Close is idempotent.
func busClose(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "x", eventbus.SubscribeOptions{})
	require.NoError(t, b.Close())
	s.ended(t, sub, eventbus.ErrClosed)
	_, err := b.Publish("x", "msg", 1)
	assert.True(t, errors.Is(err, eventbus.ErrClosed), "%v", err)
	_, err = b.Subscribe(context.Background(), "x", eventbus.SubscribeOptions{})
	assert.ErrorIs(t, err, eventbus.ErrClosed)
	assert.NoError(t, b.Close())
}
