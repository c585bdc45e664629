package frame_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Every frame's payload, zero and filled, encodes to the bytes the wire
// (docs/protocol.md) has: a change of a payload type must not move a byte.
func TestWireGolden(t *testing.T) {
	t.Parallel()
	q := frame.QueueFigures{QueueSize: 1, MaxQueued: 2, QueuedBytes: 3, MaxQueuedBytes: 4}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"resync zero", frame.ResyncData{}, `{"reason":"","lastDeliveredId":0}`},
		{"resync full", frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: 1, CompleteFromID: 2, Epoch: "e", FirstDroppedID: 3, LastDroppedID: 4, DroppedCount: 5, SkippedCount: 6},
			`{"reason":"events_dropped","lastDeliveredId":1,"completeFromId":2,"epoch":"e","firstDroppedId":3,"lastDroppedId":4,"droppedCount":5,"skippedCount":6}`},
		{"replay_complete zero", frame.ReplayCompleteData{}, `{"lastReplayedEventId":0,"replayedCount":0}`},
		{"replay_complete full", frame.ReplayCompleteData{LastReplayedEventID: 9, ReplayedCount: 2, FirstReplayedEventID: 8, HistoryLost: true},
			`{"lastReplayedEventId":9,"replayedCount":2,"firstReplayedEventId":8,"historyLost":true}`},
		{"slow_client_warning zero", frame.SlowClientWarningData{}, `{"queueSize":0,"maxQueued":0,"queuedBytes":0,"maxQueuedBytes":0,"lastEventId":0,"threshold":""}`},
		{"slow_client_warning full", frame.SlowClientWarningData{QueueFigures: q, LastEventID: 7, Threshold: "75%"},
			`{"queueSize":1,"maxQueued":2,"queuedBytes":3,"maxQueuedBytes":4,"lastEventId":7,"threshold":"75%"}`},
		{"client_evicted zero", frame.ClientEvictedData{}, `{"queueSize":0,"maxQueued":0,"queuedBytes":0,"maxQueuedBytes":0,"reason":"","droppedAfter":0}`},
		{"client_evicted full", frame.ClientEvictedData{QueueFigures: q, Reason: frame.ReasonQueueOverflow, DroppedAfter: 5},
			`{"queueSize":1,"maxQueued":2,"queuedBytes":3,"maxQueuedBytes":4,"reason":"queue_overflow","droppedAfter":5}`},
		{"session_closed", frame.SessionClosedData{Session: "s", Reason: "closed"}, `{"session":"s","reason":"closed"}`},
		{"snapshot", frame.SnapshotData{Reason: frame.ReasonRequested, LastEventID: 3, State: json.RawMessage(`{"a":1}`)},
			`{"reason":"requested","lastEventId":3,"state":{"a":1}}`},
		{"turn_start", frame.TurnData{Turn: "t", Session: "s"}, `{"turn":"t","session":"s"}`},
		{"turn_end", frame.TurnData{Turn: "t", Reason: frame.ReasonError, Message: "m"}, `{"turn":"t","reason":"error","message":"m"}`},
		{"turn report", frame.TurnData{Turn: "t", Session: "s", StartID: 1, EndID: 2}, `{"turn":"t","session":"s","startId":1,"endId":2}`},
		{"turn_cancel all", frame.TurnData{}, `{}`},
		{"turn_cancel one", frame.TurnData{Turn: "t", By: "c"}, `{"turn":"t","by":"c"}`},
		{"turn_cancel cascade", frame.TurnData{Cascade: true}, `{"cascade":true}`},
		{"turn_cancel full", frame.TurnData{Turn: "t", Cascade: true, By: "c"}, `{"turn":"t","cascade":true,"by":"c"}`},
		{"presence", frame.PresenceData{Session: "s", Clients: 2, Status: "idle", Turn: "t", Joined: []string{"a"}, Left: []string{"b"}},
			`{"session":"s","clients":2,"status":"idle","turn":"t","joined":["a"],"left":["b"]}`},
		{"presence zero", frame.PresenceData{}, `{"session":"","clients":0,"status":""}`},
	} {
		b, err := json.Marshal(tc.v)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, string(b), tc.name)
	}
}
