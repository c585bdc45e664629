package eventbus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// runTurns runs n turns t0…t(n-1) on session s of b, one after the other,
// each with one event, ended complete.
func runTurns(t testing.TB, b *eventbus.Bus, s string, n int) {
	t.Helper()
	for i := range n {
		tr, err := b.StartTurn(context.Background(), s, eventbus.TurnOptions{ID: fmt.Sprint("t", i)})
		require.NoError(t, err)
		_, err = tr.Publish("step", map[string]int{"i": i})
		require.NoError(t, err)
		_, err = tr.End(nil)
		require.NoError(t, err)
	}
}

// checkRemembered checks what b says of turn id of session s: remembered
// (Turn finds it ended complete; StartTurn and Cancel of it are
// ErrTurnEnded, nothing written) or forgotten (Turn does not find it).
func checkRemembered(t *testing.T, b *eventbus.Bus, s, id string, remembered bool) {
	t.Helper()
	got, ok := b.Turn(s, id)
	if !remembered {
		assert.False(t, ok, "turn %s is forgotten: %+v", id, got)
		return
	}
	if assert.True(t, ok, "turn %s is remembered", id) {
		assert.Equal(t, id, got.Turn)
		assert.Equal(t, frame.ReasonComplete, got.Reason)
		assert.NotZero(t, got.EndID)
	}
	last := b.LastEventID()
	_, err := b.StartTurn(context.Background(), s, eventbus.TurnOptions{ID: id})
	require.ErrorIs(t, err, eventbus.ErrTurnEnded, "a second turn %s", id)
	assert.ErrorContains(t, err, fmt.Sprintf("turn %q of session %q", id, s))
	_, err = b.Cancel(context.Background(), s, frame.TurnData{Turn: id})
	require.ErrorIs(t, err, eventbus.ErrTurnEnded, "a cancel of turn %s", id)
	assert.Equal(t, last, b.LastEventID(), "nothing written")
}

// A turn id is unique within its session while the bus can show any of
// the turn: a session remembers its max(32, ReplayBufferSize) most
// recently ended turns, so every turn whose turn_end its replay buffer
// holds (the buffer holds no more records than that), and forgets none on
// a ClearReplayBuffer (a node's own act: every node must keep agreeing on
// which ids are used). A reused id is ErrTurnEnded; Turn finds the turn.
func TestEndedTurnsAreRememberedWhileTheBufferCouldHoldThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ring      int
		turns     int
		clear     bool     // ClearReplayBuffer after the turns
		forgotten []string // ids the bus no longer knows
		known     []string // ids it refuses
	}{
		// 40 turns of 3 records: the ring holds all 120.
		{name: "40 turns in the ring", ring: 1000, turns: 40, known: []string{"t0", "t1", "t7", "t8", "t39"}},
		// 1,000 turns of 3 records (turn i: ids 3i+1…3i+3), the ring
		// holds the last 500 (ids 2,501…3,000, from t833's end): the 500
		// newest turns are remembered, t832 and t500 too, whose records
		// have left the buffer.
		{name: "1000 turns, a ring of 500", ring: 500, turns: 1000,
			forgotten: []string{"t0", "t499"}, known: []string{"t500", "t832", "t833", "t999"}},
		// A ring of 10: the 32 newest (t8…t39).
		{name: "a small ring", ring: 10, turns: 40, forgotten: []string{"t0", "t7"}, known: []string{"t8", "t20", "t39"}},
		{name: "a cleared ring", ring: 1000, turns: 40, clear: true, known: []string{"t0", "t39"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := created(t, eventbus.Options{ReplayBufferSize: tc.ring}, "s")
			runTurns(t, b, "s", tc.turns)
			if tc.clear {
				require.NoError(t, b.ClearReplayBuffer("s"))
			}
			for _, id := range tc.known {
				checkRemembered(t, b, "s", id, true)
			}
			for _, id := range tc.forgotten {
				checkRemembered(t, b, "s", id, false)
				// Nothing of it is left: the id may start a new turn.
				tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: id})
				require.NoError(t, err, "turn %s again", id)
				_, err = tr.End(nil)
				require.NoError(t, err)
				got, ok := b.Turn("s", id)
				require.True(t, ok)
				assert.Equal(t, tr.Start().ID, got.StartID, "the new turn")
			}
		})
	}
}
