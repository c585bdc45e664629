package eventbustest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// turns: a turn's records in the log — turn_start, its events, a
// cancel's turn_cancel and the one turn_end{cancelled} — the producer's
// context cancelled, "is a turn active?" answered from the log, a second
// End answered with the first end, and a cancel held for a turn not yet
// started applied when it starts.
func turns(t *testing.T, s *suite) {
	b := s.newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s", ""))
	s.syncBus(t, b)
	sub := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	record := func(typ string) frame.TurnData {
		t.Helper()
		ev := s.next(t, sub)
		require.Equal(t, typ, ev.Type, "frame %s (id %d, data %s)", ev.Type, ev.ID, ev.Data)
		require.NotZero(t, ev.ID)
		var d frame.TurnData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		return d
	}

	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	assert.Equal(t, "t1", record(frame.TypeTurnStart).Turn)
	active, ok := b.Turn("s", "")
	require.True(t, ok)
	assert.Equal(t, tr.Start().ID, active.StartID)
	_, err = tr.Publish("msg", map[string]int{"n": 1})
	require.NoError(t, err)
	record("msg")

	res, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: "t1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"t1"}, res.Cancelled)
	record(frame.TypeTurnCancel)
	assert.Equal(t, frame.ReasonCancelled, record(frame.TypeTurnEnd).Reason)
	select {
	case <-tr.Context().Done():
	case <-sub.Done():
		t.Fatal("subscription ended")
	}
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, frame.TypeTurnEnd, end.Type)
	s.syncBus(t, b)
	_, ok = b.Turn("s", "")
	assert.False(t, ok)
	quiet(t, sub)

	res, err = b.Cancel(context.Background(), "s", frame.TurnData{Turn: "t2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"t2"}, res.Held)
	record(frame.TypeTurnCancel)
	t2, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t2"})
	require.NoError(t, err)
	record(frame.TypeTurnStart)
	assert.Equal(t, frame.ReasonCancelled, record(frame.TypeTurnEnd).Reason)
	<-t2.Context().Done()

	t3, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t3"})
	require.NoError(t, err)
	record(frame.TypeTurnStart)
	end, err = t3.End(nil)
	require.NoError(t, err)
	again, err := t3.End(nil)
	require.NoError(t, err)
	assert.Equal(t, end.ID, again.ID)
	assert.Equal(t, frame.ReasonComplete, record(frame.TypeTurnEnd).Reason)
	s.syncBus(t, b)
	quiet(t, sub)
}
