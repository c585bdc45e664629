package sse_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// ?types= selects the event types of the replay and of the live stream.
func TestHandlerTypesQuery(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	a1 := publish(t, b, "s1", "a", nil)
	publish(t, b, "s1", "b", nil)
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{PlainIDs: true}), nil)
	s := openRaw(t, srv.URL+"/session/s1/events?types=a&lastEventId=0", nil)
	defer s.close()
	assert.Equal(t, a1.ID, s.next(t).ID)
	assert.Equal(t, frame.TypeReplayComplete, s.next(t).Type)
	publish(t, b, "s1", "b", nil)
	a2 := publish(t, b, "s1", "a", nil)
	assert.Equal(t, a2.ID, s.next(t).ID, "the live b is not sent")
}

// ?snapshot=1 with a provider: the snapshot frame, then the events after
// the id it reflects.
func TestHandlerSnapshotQuery(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{Snapshots: func(context.Context, string) (json.RawMessage, uint64, error) {
		return json.RawMessage(`{"text":"ab"}`), 2, nil
	}})
	publish(t, b, "s1", "a", nil)
	publish(t, b, "s1", "b", nil)
	c := publish(t, b, "s1", "c", nil)
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{PlainIDs: true}), nil)
	s := openRaw(t, srv.URL+"/session/s1/events?snapshot=1", nil)
	defer s.close()
	ev := s.next(t)
	assert.Equal(t, frame.TypeSnapshot, ev.Type)
	var d frame.SnapshotData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	assert.EqualValues(t, 2, d.LastEventID)
	assert.JSONEq(t, `{"text":"ab"}`, string(d.State))
	assert.Equal(t, c.ID, s.next(t).ID)
	assert.Equal(t, frame.TypeReplayComplete, s.next(t).Type)
}
