package eventbus_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

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
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5},
		},
		{
			name:     "cursor before the ring",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(3)},
			want:     append(append([]string{"state_resync_required:ring_evicted"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 3, CompleteFromID: 8},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5},
		},
		{
			name:     "cursor 0 with an evicted ring",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(0)},
			want:     append(append([]string{"state_resync_required:ring_evicted"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: 0, CompleteFromID: 8},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5},
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
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 2},
		},
		{
			name:     "cursor at the next id",
			opts:     eventbus.SubscribeOptions{Cursor: eventbus.At(13)},
			want:     append(append([]string{"state_resync_required:epoch_reset"}, ring...), "replay_complete"),
			resync:   &frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: 13, Epoch: "e1"},
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5},
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
			complete: &frame.ReplayCompleteData{LastReplayedEventID: 12, ReplayedCount: 5},
		},
		{
			name: "no cursor replays the ring without frames",
			opts: eventbus.SubscribeOptions{},
			want: ring,
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
