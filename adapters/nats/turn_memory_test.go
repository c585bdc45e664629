package nats_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Over NATS a node learns turns from the stream: the node that ran 40
// turns, one that watched them (and cleared its own replay buffer), and
// one that joins after them all remember the same turns — the
// max(32, ReplayBufferSize) newest, so every turn a buffer holds the end
// of, not only the 32 newest — and each refuses a start reusing such an
// id (ErrTurnEnded, nothing written) and a cancel of it; older ones are
// forgotten on every node alike.
func TestEndedTurnsAreRememberedAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ring      int
		turns     int
		known     []string
		forgotten []string
	}{
		// 40 turns of 3 records and the session's creation: all held.
		{name: "all in the ring", ring: 1000, turns: 40, known: []string{"t0", "t7", "t8", "t39"}},
		// A ring of 10: only the 32 newest are remembered.
		{name: "a small ring", ring: 10, turns: 40, known: []string{"t8", "t39"}, forgotten: []string{"t0", "t7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := eventbus.Options{ReplayBufferSize: tc.ring}
			opts := uniqueStream()
			a := newNode(t, shared.ClientURL(), cfg, opts...)
			watcher := newNode(t, shared.ClientURL(), cfg, opts...)
			require.NoError(t, a.bus.CreateSession("s", ""))
			for i := range tc.turns {
				tr, err := a.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: fmt.Sprint("t", i)})
				require.NoError(t, err)
				_, err = tr.Publish("step", map[string]int{"i": i})
				require.NoError(t, err)
				_, err = tr.End(nil)
				require.NoError(t, err)
			}
			late := newNode(t, shared.ClientURL(), cfg, opts...)
			syncNode(t, watcher.bus)
			require.NoError(t, watcher.bus.ClearReplayBuffer("s")) // this node's own: it forgets no turn
			for _, n := range []struct {
				name string
				b    *eventbus.Bus
			}{{"running", a.bus}, {"watching", watcher.bus}, {"late", late.bus}} {
				syncNode(t, n.b)
				last := n.b.LastEventID()
				for _, id := range tc.known {
					got, ok := n.b.Turn("s", id)
					require.True(t, ok, "%s node: turn %s", n.name, id)
					assert.Equal(t, frame.ReasonComplete, got.Reason, "%s node: turn %s", n.name, id)
					_, err := n.b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: id})
					require.ErrorIs(t, err, eventbus.ErrTurnEnded, "%s node: a second turn %s", n.name, id)
					_, err = n.b.Cancel(context.Background(), "s", frame.TurnData{Turn: id})
					require.ErrorIs(t, err, eventbus.ErrTurnEnded, "%s node: a cancel of turn %s", n.name, id)
				}
				for _, id := range tc.forgotten {
					_, ok := n.b.Turn("s", id)
					assert.False(t, ok, "%s node: turn %s is forgotten", n.name, id)
				}
				syncNode(t, n.b)
				assert.Equal(t, last, n.b.LastEventID(), "%s node: nothing written", n.name)
			}
		})
	}
}
