package eventbus_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The seven inputs of the AgentPool porting issue, one named test each (the
// example server's input 7 is TestPublish in examples/agentserver/server;
// input 3 is TestInput3ClosedChildHistoryResumable below).

// Input 1: CreateSession on a closed id reopens it under the same sequence;
// a resume with a cursor from before the close is told what it lost; a late
// publish to a closed id that was not reopened stays refused.
func TestInput1ReopenClosedSession(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	before := publish(t, b, "s", 3)
	require.NoError(t, b.CloseSession("s"))
	closedID := b.LastEventID()

	_, err := b.Publish("s", "msg", nil)
	require.ErrorIs(t, err, eventbus.ErrSessionClosed, "a late publish to a closed id stays refused")
	_, err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.True(t, b.SessionClosed("s"))

	require.NoError(t, b.CreateSession("s", ""), "ACP session/resume: same id")
	assert.False(t, b.SessionClosed("s"))
	assert.True(t, b.SessionExists("s"))
	after := publish(t, b, "s", 2)
	assert.Equal(t, closedID+1, after[0], "the same bus sequence goes on")

	// A client that had everything up to before[1] comes back: it is told
	// that before[2] and session_closed are gone, then gets the new events.
	old := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(before[1])})
	evs := drain(old)
	require.Equal(t, []string{"state_resync_required:ring_evicted", strconv.FormatUint(after[0], 10) + "r",
		strconv.FormatUint(after[1], 10) + "r", "replay_complete"}, describe(evs))
	rs := decode[frame.ResyncData](t, evs[0])
	assert.Equal(t, before[1], rs.LastDeliveredID)
	assert.Equal(t, after[0], rs.CompleteFromID)

	// One that saw session_closed lost nothing: no frame.
	seen := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(closedID)})
	assert.Equal(t, 0, count(drain(seen), frame.TypeStateResyncRequired))

	// Reopening an open id is the usual no-op; the parent must be open.
	require.NoError(t, b.CreateSession("s", ""))
	require.NoError(t, b.CreateSession("p", ""))
	require.NoError(t, b.CloseSession("p"))
	require.ErrorIs(t, b.CreateSession("c", "p"), eventbus.ErrSessionClosed)
}

// Input 2: closing a middle session keeps the tree connected; and
// CloseSessionTree closes every descendant, however deep.
func TestInput2CloseMiddleKeepsTreeConnected(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("g", ""))
	require.NoError(t, b.CreateSession("p", "g"))
	require.NoError(t, b.CreateSession("c", "p"))
	sub := subscribe(t, b, "g", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	require.NoError(t, b.CloseSession("p"))
	closed := b.LastEventID()
	ev, err := b.Publish("c", "msg", nil)
	require.NoError(t, err)
	assert.Equal(t, []uint64{closed, ev.ID}, ids(drain(sub)), "g's descendants subscriber keeps hearing c")
	assert.Equal(t, "g", parentOf(b, "c"), "c moved up to g")
}

func TestInput2CloseSessionTreeAnyDepth(t *testing.T) {
	t.Parallel()
	const depth = 5000 // deeper than any recursion would like
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("n0", ""))
	for i := 1; i < depth; i++ {
		require.NoError(t, b.CreateSession("n"+strconv.Itoa(i), "n"+strconv.Itoa(i-1)))
	}
	require.NoError(t, b.CreateSession("side", "n2"))
	all := subscribe(t, b, "n0", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
	require.NoError(t, b.CloseSessionTree("n0"))
	assert.Empty(t, b.Sessions())
	var order []string
	for _, ev := range drain(all) {
		order = append(order, ev.Session)
	}
	require.Len(t, order, depth+1, "one session_closed per session")
	assert.Equal(t, "n"+strconv.Itoa(depth-1), order[0], "the deepest first")
	assert.Equal(t, "n0", order[depth], "the root last")
	assert.Less(t, indexOf(order, "side"), indexOf(order, "n2"), "a child before its parent")
	require.NoError(t, b.CloseSessionTree("n0"), "idempotent")
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Input 4: a root that already published can be attached to a parent at
// any time; its events then reach the new ancestors, a descendants resume
// replays its history merged by id, and cycles are still refused.
func TestInput4AttachLate(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("p", ""))
	c1 := publish(t, b, "c", 2) // the sub-agent starts before its link is known
	p1 := publish(t, b, "p", 1)
	live := subscribe(t, b, "p", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	require.NoError(t, b.CreateSession("c", "p"), "attach late")
	c2 := publish(t, b, "c", 1)
	assert.Equal(t, c2, ids(drain(live)), "c's events now fan out to p's descendants subscribers")

	fresh := subscribe(t, b, "p", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	want := []uint64{c1[0], c1[1], p1[0], c2[0]}
	evs := drain(fresh)
	assert.Equal(t, want, ids(evs[:len(evs)-1]), "history merged by id")
	assert.Equal(t, frame.TypeReplayComplete, evs[len(evs)-1].Type)

	require.ErrorIs(t, b.CreateSession("p", "c"), scope.ErrCycle, "cycles are still refused")
	require.NoError(t, b.CreateSession("q", ""))
	require.ErrorIs(t, b.CreateSession("q", "q"), scope.ErrCycle)
	require.ErrorIs(t, b.CreateSession("c", "q"), eventbus.ErrInvalid, "a session is attached once, not moved")
}

// Input 4's seam: the session controller is asked for a session's parent
// the first time the bus sees the id, and unknown parents are created the
// same way.
func TestInput4SessionController(t *testing.T) {
	t.Parallel()
	var asked []string
	parents := map[string]string{"tool": "sub", "sub": "main", "loop1": "loop2", "loop2": "loop1"}
	b := newBus(t, eventbus.Options{SessionController: func(id string) string {
		asked = append(asked, id)
		return parents[id]
	}})
	root := subscribe(t, b, "main", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	ev, err := b.Publish("tool", "msg", nil)
	require.NoError(t, err)
	assert.Equal(t, []uint64{ev.ID}, ids(drain(root)), "placed in the tree from its first event")
	assert.Equal(t, "sub", parentOf(b, "tool"))
	assert.Equal(t, "main", parentOf(b, "sub"))
	assert.Equal(t, []string{"main", "tool", "sub"}, asked, "asked once per id, the first time it is seen")
	publish(t, b, "tool", 1)
	assert.Len(t, asked, 3, "not asked again")

	// A controller that answers with a cycle does not loop: the session
	// that would close it becomes a root.
	publish(t, b, "loop1", 1)
	assert.Equal(t, "loop2", parentOf(b, "loop1"))
	assert.Equal(t, "", parentOf(b, "loop2"))

	// CreateSession names the parent itself; the controller is not asked.
	require.NoError(t, b.CreateSession("explicit", ""))
	assert.NotContains(t, asked, "explicit")
}

// Input 5: CloseSession and ClearReplayBuffer on an unknown id are no-ops;
// NoReplay wins over a cursor.
func TestInput5IdempotentLikeAgentPool(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CloseSession("never"))
	require.NoError(t, b.CloseSessionTree("never"))
	require.NoError(t, b.ClearReplayBuffer("never"))
	assert.False(t, b.SessionExists("never"))
	assert.Zero(t, b.LastEventID(), "no session_closed for a session that never was")

	publish(t, b, "s", 3)
	require.NoError(t, b.CloseSession("s"))
	require.NoError(t, b.ClearReplayBuffer("s"), "closed: a no-op too")

	publish(t, b, "t", 3)
	s := subscribe(t, b, "t", eventbus.SubscribeOptions{NoReplay: true, Cursor: eventbus.At(1)})
	assert.Empty(t, drain(s), "replay=False with last_event_id replays nothing, and no frame")
	live := publish(t, b, "t", 1)
	assert.Equal(t, live, ids(drain(s)))
}

// Input 6: an unset policy means drop_oldest (announced) for in-process
// subscribers; an explicit one applies as set. (The SSE handler's side of
// the rule is TestHandlerOverflowDefault in adapters/sse.)
func TestInput6OverflowDefault(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxQueueSize: 2, DisableSlowClientWarning: true})
	assert.Empty(t, b.Options().OverflowPolicy, "unset; the drop_oldest below is the in-process default")
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	ids5 := publish(t, b, "s", 5)
	evs := drain(s)
	assert.NoError(t, s.Err(), "EventBus(max_queue_size=N) ported literally keeps the subscriber")
	require.Equal(t, []string{"state_resync_required:events_dropped", strconv.FormatUint(ids5[3], 10), strconv.FormatUint(ids5[4], 10)}, describe(evs))
	d := decode[frame.ResyncData](t, evs[0])
	assert.Equal(t, 3, d.DroppedCount, "the oldest three were dropped, announced")

	ex := newBus(t, eventbus.Options{MaxQueueSize: 2, OverflowPolicy: eventbus.DropSubscriber})
	assert.Equal(t, eventbus.DropSubscriber, ex.Options().OverflowPolicy)
	s2 := subscribe(t, ex, "s", eventbus.SubscribeOptions{NoReplay: true})
	publish(t, ex, "s", 5)
	_, err := readToEnd(t, s2)
	assert.ErrorIs(t, err, eventbus.ErrEvicted, "an explicit policy applies as set")
}

// All is the range-over-func form of Next: `async for event in queue`.
func TestSubscriptionAll(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	want := publish(t, b, "s", 3)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	var got []uint64
	for ev, err := range s.All(context.Background()) {
		require.NoError(t, err)
		got = append(got, ev.ID)
		if len(got) == 2 {
			break
		}
	}
	assert.Equal(t, want[:2], got, "break leaves the subscription open")
	assert.NoError(t, s.Err())

	more := publish(t, b, "s", 1)
	go func() { _ = b.CloseSession("s") }()
	var end error
	for ev, err := range s.All(context.Background()) {
		if err != nil {
			end = err
			break
		}
		got = append(got, ev.ID)
	}
	assert.ErrorIs(t, end, eventbus.ErrSessionClosed, "the last step yields why it ended")
	assert.Equal(t, append(append(want[:2:2], want[2]), more[0], b.LastEventID()), got)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	s3 := subscribe(t, b, "other", eventbus.SubscribeOptions{})
	for _, err := range s3.All(ctx) {
		assert.ErrorIs(t, err, context.DeadlineExceeded, "ctx done: its error, and the subscription stays usable")
	}
	assert.NoError(t, s3.Err())
}

// 10,000 subscriptions whose Events channel is opened and never read keep
// no goroutine after Bus.Close.
func TestEventsPumpsEndWithBusClose(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 subscriptions")
	}
	before := goleak.IgnoreCurrent()
	const n = 10_000
	b, err := eventbus.New(eventbus.Options{MaxSubscribers: n})
	require.NoError(t, err)
	base := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		_ = s.Events() // opened, never read
	}
	publish(t, b, "s", 2) // every pump now blocks handing over a frame
	require.Eventually(t, func() bool { return runtime.NumGoroutine() >= base+n }, waitFor, time.Millisecond)
	running := runtime.NumGoroutine()
	start := time.Now()
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= base }, waitFor, 10*time.Millisecond,
		"pumps still running after Close: %d goroutines, %d before", runtime.NumGoroutine(), base)
	t.Logf("%d goroutines with %d unread Events channels; back to %d within %v of Bus.Close",
		running, n, runtime.NumGoroutine(), time.Since(start).Round(10*time.Millisecond))
	goleak.VerifyNone(t, before)
}

// A reader that keeps reading after Bus.Close still gets everything queued.
func TestEventsDrainAfterBusClose(t *testing.T) {
	t.Parallel()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	want := publish(t, b, "s", 50)
	require.NoError(t, b.Close())
	var got []uint64
	for ev := range s.Events() {
		got = append(got, ev.ID)
		time.Sleep(time.Millisecond) // a slow but live reader
	}
	assert.Equal(t, want, got)
	assert.True(t, errors.Is(s.Err(), eventbus.ErrClosed))
}

// Input 3: a closed sub-agent's history stays resumable while its tree
// lives. Root with two children (ring 1000); a descendants client reads 46
// of 54 events, goes away for 200 ms, the children finish and are closed;
// its resume with Last-Event-ID loses nothing (before: ring_evicted, 8 of
// 54 gone). The buffers go after ClosedRetention (the resume is then told),
// or when the root closes.
func TestInput3ClosedChildHistoryResumable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
		require.NoError(t, b.CreateSession("root", ""))
		require.NoError(t, b.CreateSession("a", "root"))
		require.NoError(t, b.CreateSession("b", "root"))
		c := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants})
		var all []uint64
		for i := 0; i < 18; i++ {
			for _, s := range []string{"root", "a", "b"} {
				all = append(all, publish(t, b, s, 1)...)
			}
		}
		got := ids(readN(t, c, 46))
		require.Equal(t, all[:46], got)
		c.Close() // the client goes away
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, b.CloseSession("a"))
		require.NoError(t, b.CloseSession("b"))
		closedA, closedB := b.LastEventID()-1, b.LastEventID()
		assert.Equal(t, 2, b.Stats().Retained)

		r := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(got[45])})
		evs := drain(r)
		assert.Equal(t, append(append([]uint64{}, all[46:]...), closedA, closedB), ids(evs), "nothing lost")
		assert.Zero(t, count(evs, frame.TypeStateResyncRequired))
		allScope := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.All, Cursor: eventbus.At(got[45])})
		assert.Zero(t, count(drain(allScope), frame.TypeStateResyncRequired), "the all scope reads them too")

		// After ClosedRetention (10 min) the buffers go; a resume is told.
		time.Sleep(eventbus.Options{}.WithDefaults().ClosedRetention + time.Minute)
		synctest.Wait()
		st := b.Stats()
		assert.Zero(t, st.Retained)
		assert.Equal(t, uint64(2), st.RetainedDropped)
		late := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(got[45])})
		evs = drain(late)
		require.NotEmpty(t, evs)
		assert.Equal(t, "state_resync_required:ring_evicted", describe(evs)[0])
	})
}

// The root closing drops what its tree kept; MaxRetained drops the oldest.
func TestRetainedBounds(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxRetained: 1})
	require.NoError(t, b.CreateSession("root", ""))
	require.NoError(t, b.CreateSession("a", "root"))
	require.NoError(t, b.CreateSession("b", "root"))
	a := publish(t, b, "a", 1)
	publish(t, b, "b", 1)
	require.NoError(t, b.CloseSession("a"))
	require.NoError(t, b.CloseSession("b"))
	st := b.Stats()
	assert.Equal(t, 1, st.Retained, "the cap")
	assert.Equal(t, uint64(1), st.RetainedDropped, "a's buffer, the oldest, went")
	r := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(a[0] - 1)})
	assert.Equal(t, "state_resync_required:ring_evicted", describe(drain(r))[0], "and a resume that needed it is told")

	all := subscribe(t, b, "x", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
	require.NoError(t, b.CloseSession("root"))
	st = b.Stats()
	assert.Zero(t, st.Retained, "the root closed: nothing left to resume into")
	assert.Equal(t, uint64(2), st.RetainedDropped)
	again := subscribe(t, b, "x", eventbus.SubscribeOptions{Scope: scope.All, Cursor: eventbus.At(a[0])})
	assert.Equal(t, "state_resync_required:ring_evicted", describe(drain(again))[0])
	all.Close()
}

// A reopened session takes its kept buffer back: its own resume from
// before the close loses nothing.
func TestReopenAdoptsKeptHistory(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("root", ""))
	require.NoError(t, b.CreateSession("sub", "root"))
	ids3 := publish(t, b, "sub", 3)
	require.NoError(t, b.CloseSession("sub"))
	closed := b.LastEventID()
	require.NoError(t, b.CreateSession("sub", "root"), "session/load")
	assert.Zero(t, b.Stats().Retained)
	next := publish(t, b, "sub", 1)
	s := subscribe(t, b, "sub", eventbus.SubscribeOptions{Cursor: eventbus.At(ids3[0])})
	evs := drain(s)
	assert.Equal(t, []uint64{ids3[1], ids3[2], closed, next[0]}, ids(evs))
	assert.Zero(t, count(evs, frame.TypeStateResyncRequired))
	d := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	assert.Zero(t, count(drain(d), frame.TypeStateResyncRequired), "still under root: root's scope loses nothing")
}
