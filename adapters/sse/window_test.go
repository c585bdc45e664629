package sse_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
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
	b := newBus(t, eventbus.Options{Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
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

// The snapshot frame carries the id its state reflects on its id: line,
// epoch-qualified like an event's, so that a browser's EventSource that
// reconnects right after it (the same URL, that id as Last-Event-ID, as
// the decoder hands it on) resumes after the snapshot: exactly the events
// after its id, and no second snapshot — whether the snapshot was asked
// for (?snapshot=1) or replaced a lost position (ring_evicted).
func TestHandlerSnapshotIDResumes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, query, reason string }{
		{"asked", "?snapshot=1", frame.ReasonRequested},
		{"lost position", "?lastEventId=e-1", frame.ReasonRingEvicted},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 2,
				Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
					return json.RawMessage(`{"text":"abc"}`), 3, nil
				}})
			for _, typ := range []string{"a", "b", "c", "d"} { // ids 1–4; the ring holds 3 and 4
				publish(t, b, "s1", typ, nil)
			}
			srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
			url := srv.URL + "/session/s1/events" + c.query
			s := openRaw(t, url, nil)
			ev := s.next(t)
			require.Equal(t, frame.TypeSnapshot, ev.Type)
			var d frame.SnapshotData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			assert.Equal(t, c.reason, d.Reason)
			assert.Zero(t, ev.ID, "the envelope has no id: the frame is no event")
			assert.Equal(t, "e-3", s.dec.LastEventID(), "the id: line carries the id the state reflects")
			s.close()

			e := publish(t, b, "s1", "e", nil) // id 5, while the browser is away
			again := openRaw(t, url, http.Header{"Last-Event-ID": {s.dec.LastEventID()}})
			var got []uint64
			for ev := again.next(t); ev.Type != frame.TypeReplayComplete; ev = again.next(t) {
				require.NotEqual(t, frame.TypeSnapshot, ev.Type, "no second snapshot")
				require.NotEqual(t, frame.TypeStateResyncRequired, ev.Type, "no gap")
				got = append(got, ev.ID)
			}
			assert.Equal(t, []uint64{4, e.ID}, got, "exactly the events after the snapshot's id")
		})
	}
}
