package eventbus_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// Resume — a subscriber coming back with a cursor — is tested here for the
// bus: replay from a cursor, every state_resync_required a resume can get
// (ring_evicted, epoch_reset, replay_budget_exceeded) and where its gap ends,
// descendants and all scopes, closed, reopened, retained and expired
// sessions (the replay byte budget, which cuts any replay, resumed or not,
// is TestReplayBudget in flow_test.go). The same resume table runs against every backend in
// eventbustest (ResumeTable); the AgentPool porting inputs that end in a
// resume (TestInput1, TestInput3) stay with the parity scenarios in
// agentpool_parity_test.go.

// A ring of 5 holding ids 8…12 of one session.
func TestResume(t *testing.T) {
	t.Parallel()
	ring := []string{"8r", "9r", "10r", "11r", "12r"}
	tests := []struct {
		name     string
		opts     eventbus.SubscribeOptions
		want     []string
		resync   *frame.ResyncData         // the leading frame's data
		complete *frame.ReplayCompleteData // replay_complete's data
	}{
		{
			name:     "cursor inside the ring",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(7)},
			want:     append(append([]string{}, ring...), "replay_complete"),
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8},
		},
		{
			name:     "cursor before the ring",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(3)},
			want:     append(append([]string{"state_resync_required:ring_evicted"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 3, CompleteFromID: 8},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8, HistoryLost: true},
		},
		{
			name:     "cursor 0 with an evicted ring",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(0)},
			want:     append(append([]string{"state_resync_required:ring_evicted"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 0, CompleteFromID: 8},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8, HistoryLost: true},
		},
		{
			name:     "cursor at the newest id",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(12)},
			want:     []string{"replay_complete"},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 0},
		},
		{
			name:     "cursor in the middle",
			opts:     eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: 10, Epoch: "e1"}},
			want:     []string{"11r", "12r", "replay_complete"},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 2, FirstReplayedEventID: 11},
		},
		{
			name:     "cursor at the next id",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(13)},
			want:     append(append([]string{"state_resync_required:epoch_reset"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: 13, Epoch: "e1"},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8, HistoryLost: true},
		},
		{
			name:   "cursor far ahead",
			opts:   eventbus.SubscribeOptions{Cursor: eventbus.At(1 << 40)},
			want:   append(append([]string{"state_resync_required:epoch_reset"}, ring...), "replay_complete"),
			resync: &frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: 1 << 40, Epoch: "e1"},
		},
		{
			name:     "wrong epoch",
			opts:     eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: 10, Epoch: "e0"}},
			want:     append(append([]string{"state_resync_required:epoch_reset"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: 10, Epoch: "e1"},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8, HistoryLost: true},
		},
		{
			// Issue 27.10: a late joiner got the ring's events and nothing
			// said that older ones were gone; replay_complete says so.
			name:     "no cursor replays the ring and says older history is gone",
			opts:     eventbus.SubscribeOptions{},
			want:     append(append([]string{}, ring...), "replay_complete"),
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5, FirstReplayedEventID: 8, HistoryLost: true},
		},
		{
			name: "NoReplay",
			opts: eventbus.SubscribeOptions{NoReplay: true},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{ReplayBufferSize: 5, Epoch: "e1"})
			publish(t, b, "s", 12)
			s := subscribe(t, b, "s", tt.opts)
			got := drain(s)
			assert.Equal(t, tt.want, describe(got))
			if tt.resync != nil {
				assert.Equal(t, *tt.resync, decode[frame.ResyncData](t, got[0]))
				assert.Equal(t, "s", got[0].Session)
			}
			if tt.complete != nil {
				c := find(t, got, frame.TypeReplayComplete)
				assert.Equal(t, *tt.complete, decode[frame.ReplayCompleteData](t, c))
			}
			for _, e := range got {
				assert.Equal(t, e.ID != 0, e.Replay, "only replayed copies carry Replay: %s", e.Type)
			}
			// Live events follow, not marked as replay.
			publish(t, b, "s", 1)
			live := readN(t, s, 1)
			assert.Equal(t, []string{"13"}, describe(live))
			assert.Zero(t, b.Stats().Guarded)
		})
	}
}

func TestResumeAfterClearReplayBuffer(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s", 4)
	require.NoError(t, b.ClearReplayBuffer("s"))
	require.NoError(t, b.ClearReplayBuffer("nope"), "a no-op on an unknown id, as AgentPool's clear_replay_buffer")
	assert.False(t, b.SessionExists("nope"), "and it creates nothing")
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(2)})
	got := drain(s)
	require.Equal(t, []string{"state_resync_required:ring_evicted", "replay_complete"}, describe(got))
	assert.Equal(t, frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 2, CompleteFromID: 5},
		decode[frame.ResyncData](t, got[0]))
	// A client that had everything is not told anything.
	s2 := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(4)})
	assert.Equal(t, []string{"replay_complete"}, describe(drain(s2)))
}

// A resume continues where the previous subscription stopped: no gap, no
// duplicate, while the ring still holds the missed events.
func TestResumeContinues(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 50})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	publish(t, b, "s", 10)
	got := readN(t, s, 4)
	s.Close()
	last := got[len(got)-1].ID
	publish(t, b, "s", 10)
	r := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(last)})
	publish(t, b, "s", 3)
	all := append(ids(got), ids(drain(r))...)
	assert.Equal(t, seq(1, 23), all)
}

// A resume is told about events lost with a closed session that was in its
// scope, and only then. A closed session with a parent keeps its history
// for the descendants and all scopes of its open ancestors: their resume
// replays it (the closed session's events and its session_closed).
func TestResumeAcrossClosedSessions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		on      string
		kind    scope.Kind
		close   string
		evicted bool
		kept    bool
	}{
		{"descendants, closed child (kept)", "X", scope.Descendants, "C", false, true},
		{"descendants, closed grandchild (kept)", "X", scope.Descendants, "G", false, true},
		{"descendants, closed unrelated", "X", scope.Descendants, "U", false, false},
		{"descendants, closed parent", "X", scope.Descendants, "P", false, false},
		{"subtree, closed sibling", "X", scope.Subtree, "S", true, false},
		{"subtree, closed parent", "X", scope.Subtree, "P", true, false},
		{"subtree, closed child", "X", scope.Subtree, "C", false, false},
		{"subtree, closed unrelated", "X", scope.Subtree, "U", false, false},
		{"session, closed child", "X", scope.Session, "C", false, false},
		{"all, closed root", "X", scope.All, "U", true, false},
		{"all, closed child (kept)", "X", scope.All, "C", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// P ─┬─ X ── C ── G      U
			//    └─ S
			b := newBus(t, eventbus.Options{})
			for _, e := range [][2]string{{"P", ""}, {"X", "P"}, {"C", "X"}, {"G", "C"}, {"S", "P"}, {"U", ""}} {
				require.NoError(t, b.CreateSession(e[0], e[1]))
			}
			ev, err := b.Publish(tt.close, "msg", nil)
			require.NoError(t, err)
			cursor := ev.ID - 1
			require.NoError(t, b.CloseSession(tt.close))
			closedID := b.LastEventID()

			s := subscribe(t, b, tt.on, eventbus.SubscribeOptions{Scope: tt.kind, Cursor: eventbus.At(cursor)})
			got := drain(s)
			if tt.kept {
				assert.Equal(t, []string{fmt.Sprintf("%dr", ev.ID), fmt.Sprintf("%dr:session_closed", closedID), "replay_complete"}, describe(got))
				assert.Equal(t, 1, b.Stats().Retained)
				return
			}
			if !tt.evicted {
				assert.Equal(t, []string{"replay_complete"}, describe(got))
				return
			}
			require.Equal(t, []string{"state_resync_required:ring_evicted", "replay_complete"}, describe(got))
			assert.Equal(t, frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: cursor,
				CompleteFromID: closedID + 1}, decode[frame.ResyncData](t, got[0]))
			// A client that saw session_closed lost nothing.
			s2 := subscribe(t, b, tt.on, eventbus.SubscribeOptions{Scope: tt.kind, Cursor: eventbus.At(closedID)})
			assert.Equal(t, []string{"replay_complete"}, describe(drain(s2)))
		})
	}
}

// A session created after another one was closed is new: a descendants
// resume that now covers it must not announce a loss it never had, while a
// re-created closed id (after its tombstone is forgotten) still does.
func TestNewSessionAnnouncesNothing(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("P", ""))
	require.NoError(t, b.CreateSession("old", "P"))
	publish(t, b, "old", 3)
	require.NoError(t, b.CloseSession("old"))
	cursor := b.LastEventID()
	require.NoError(t, b.CreateSession("new", "P"))
	publish(t, b, "new", 2)

	s := subscribe(t, b, "P", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(cursor)})
	assert.Equal(t, []string{"5r", "6r", "replay_complete"}, describe(drain(s)))
}

// With several rings in scope, completeFromId is the first id after
// which nothing is missing, even when a quiet ring still holds older ids.
func TestRingEvictedAcrossRings(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 3})
	require.NoError(t, b.CreateSession("r", ""))
	require.NoError(t, b.CreateSession("c", "r"))
	publish(t, b, "c", 2) // 1, 2: c's ring keeps them
	publish(t, b, "r", 8) // 3…10: r's ring keeps 8, 9, 10
	s := subscribe(t, b, "r", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	got := drain(s)
	require.Equal(t, []string{"state_resync_required:ring_evicted", "1r", "2r", "8r", "9r", "10r", "replay_complete"}, describe(got))
	assert.Equal(t, frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 0, CompleteFromID: 8},
		decode[frame.ResyncData](t, got[0]))
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

// A descendants subscriber that disconnects resumes the merged stream of
// the subtree with one cursor: no gap, no duplicate.
func TestDescendantsResume(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 100})
	require.NoError(t, b.CreateSession("X", ""))
	require.NoError(t, b.CreateSession("C", "X"))
	require.NoError(t, b.CreateSession("G", "C"))
	var want []uint64
	pub := func(rounds int) {
		for i := 0; i < rounds; i++ {
			for _, sess := range []string{"X", "U", "G", "C", "G"} {
				ev, err := b.Publish(sess, "msg", i)
				require.NoError(t, err)
				if sess != "U" {
					want = append(want, ev.ID)
				}
			}
		}
	}
	pub(3)
	var got []uint64
	var cursor *eventbus.Position
	for round := 0; round < 5; round++ {
		s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: cursor})
		pub(2)
		evs := drain(s)
		assert.Equal(t, 0, count(evs, frame.TypeStateResyncRequired), "round %d: %v", round, describe(evs))
		// Read only part of it, then disconnect.
		part := ids(evs)
		part = part[:len(part)-round]
		got = append(got, part...)
		cursor = eventbus.At(part[len(part)-1])
		s.Close()
		pub(1)
	}
	s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: cursor})
	got = append(got, ids(drain(s))...)
	assert.Equal(t, want, got)
}

// A client that read part of a session, stayed away longer than the TTL and
// comes back with its cursor must be told that what it missed is gone; a
// silently empty replay hides a gap.
func TestResumeAfterExpiryIsAnnounced(t *testing.T) {
	t.Parallel()
	for _, kind := range []scope.Kind{scope.Session, scope.Descendants, scope.All} {
		t.Run(kind.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBus(t, eventbus.Options{SessionTTL: time.Second})
				publish(t, b, "s", 5)
				s := subscribe(t, b, "s", eventbus.SubscribeOptions{Scope: kind})
				got := readN(t, s, 3)
				s.Close()
				time.Sleep(2 * time.Second)
				synctest.Wait()
				require.False(t, b.SessionExists("s"))

				r := subscribe(t, b, "s", eventbus.SubscribeOptions{Scope: kind, Cursor: eventbus.At(got[2].ID)})
				evs := drain(r)
				require.NotEmpty(t, evs)
				assert.Equal(t, "state_resync_required:ring_evicted", describe(evs)[0],
					"events 4 and 5 were lost with the expired session: %v", describe(evs))
			})
		})
	}
}

// Issue 12.12: earliestAvailableId invited wrong client logic — a client
// that dropped every event below it lost the quiet sub-session's genuine
// events 1 and 2, which the merged replay delivers after the frame. The
// field is completeFromId: where the gap ends, not where the replay starts;
// and for replay_budget_exceeded it is the first live id, not the first id
// left out (which had the opposite meaning under the same name).
func TestResyncSaysWhereTheGapEnds(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 3})
	require.NoError(t, b.CreateSession("r", ""))
	require.NoError(t, b.CreateSession("c", "r"))
	publish(t, b, "c", 2) // 1, 2
	publish(t, b, "r", 8) // 3…10: r keeps 8, 9, 10
	s := subscribe(t, b, "r", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	got := drain(s)
	require.NotEmpty(t, got)
	assert.JSONEq(t, `{"reason":"ring_evicted","lastDeliveredId":0,"completeFromId":8}`, string(got[0].Data))
	assert.NotContains(t, string(got[0].Data), "earliestAvailableId")
	var below []uint64
	for _, ev := range got[1:] {
		if ev.ID != 0 && ev.ID < 8 {
			below = append(below, ev.ID)
		}
	}
	assert.Equal(t, []uint64{1, 2}, below, "genuine events below completeFromId arrive after the frame")

	// The budget: the first live id, so ids ≥ it all arrive on this stream.
	bb := newBus(t, eventbus.Options{ReplayBudgetBytes: 1})
	publish(t, bb, "s", 5)
	s2 := subscribe(t, bb, "s", eventbus.SubscribeOptions{})
	got = drain(s2)
	require.Len(t, got, 3, "event 1, the cut, replay_complete")
	rd := decode[frame.ResyncData](t, got[1])
	assert.Equal(t, frame.ReasonReplayBudgetExceeded, rd.Reason)
	assert.EqualValues(t, 6, rd.CompleteFromID, "the first live id")
	assert.EqualValues(t, 1, rd.LastDeliveredID)
	ev, err := bb.Publish("s", "msg", nil)
	require.NoError(t, err)
	assert.Equal(t, rd.CompleteFromID, ev.ID)
	assert.Equal(t, ev.ID, drain(s2)[0].ID, "and it arrives")
}
