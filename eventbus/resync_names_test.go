package eventbus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

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
