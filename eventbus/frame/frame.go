package frame

import (
	"encoding/json"
	"strings"
)

// Event types the bus itself produces. All but TypeSessionClosed are
// synthetic frames without an id.
const (
	// TypeStateResyncRequired tells the client its view has a gap it must
	// repair (reload the session state); data is [ResyncData]. The stream
	// stays open. From qwen-code.
	TypeStateResyncRequired = "state_resync_required"
	// TypeReplayComplete follows the replayed history of every subscribe that
	// carried a cursor (even when nothing was replayed), and of a replay
	// without a cursor only when the replay byte budget cut it short or
	// the history in scope is not whole (HistoryLost); a plain subscribe
	// without a cursor on a whole history gets none. Data is
	// [ReplayCompleteData].
	TypeReplayComplete = "replay_complete"
	// TypeSlowClientWarning warns that the live queue reached 75 % of a
	// limit; data is [SlowClientWarningData]. Once per episode.
	TypeSlowClientWarning = "slow_client_warning"
	// TypeClientEvicted is the last frame of a subscriber evicted for
	// overflow under the drop_subscriber policy; data is [ClientEvictedData].
	TypeClientEvicted = "client_evicted"
	// TypeSessionClosed is a real event (it has an id) published by
	// eventbus.Bus.CloseSession; data is [SessionClosedData].
	TypeSessionClosed = "session_closed"
	// TypeSnapshot carries the application's state of the session as of
	// an id, from the bus's snapshot provider (eventbus.Options.Snapshots):
	// sent first when the subscriber asked for it at join or when its
	// position was lost; the events after that id follow. Data is
	// [SnapshotData].
	TypeSnapshot = "snapshot"
)

// typeStreamStart is not made by the bus but by the SSE and WebSocket
// handlers (adapters/resume.TypeStreamStart, which owns it): the frame that
// opens a live-only stream. It is reserved here, with the bus's own types,
// so that no published or targeted event can be taken for it by a client.
const typeStreamStart = "stream_start"

// Reasons carried in [SnapshotData.Reason] besides ReasonRingEvicted and
// ReasonEpochReset (the position the snapshot replaces was lost).
const (
	// ReasonRequested: the subscriber asked for a snapshot at join
	// (eventbus.SubscribeOptions.Snapshot, ?snapshot=1).
	ReasonRequested = "requested"
)

// SnapshotData is the payload of a snapshot frame.
type SnapshotData struct {
	// Reason is ReasonRequested, ReasonRingEvicted or ReasonEpochReset.
	Reason string `json:"reason"`
	// LastEventID is the id the state reflects: every event in scope up to
	// it is in State, and the events after it follow the frame. It is the
	// client's cursor from here on (the frame itself has no id).
	LastEventID uint64 `json:"lastEventId"`
	// State is the application's state (JSON), as the provider returned it.
	State json.RawMessage `json:"state"`
}

// Reasons carried in [ResyncData.Reason] and [ClientEvictedData.Reason].
const (
	// ReasonEpochReset: the cursor came from another bus incarnation, or is
	// at or past the next id; the whole replay buffer is replayed.
	ReasonEpochReset = "epoch_reset"
	// ReasonRingEvicted: a session in scope dropped events after the cursor
	// from its replay buffer before the client came back.
	ReasonRingEvicted = "ring_evicted"
	// ReasonReplayBudgetExceeded: the replay stopped early at the replay
	// byte budget; resume from LastDeliveredID to fetch more.
	ReasonReplayBudgetExceeded = "replay_budget_exceeded"
	// ReasonEventsDropped: live events were dropped for this subscriber by
	// drop_oldest, drop_newest or a droppable type.
	ReasonEventsDropped = "events_dropped"
	// ReasonFeedGap: among live events, the node's backend lost events of a
	// session in scope before this node received them (a NATS node that fell
	// behind what the stream retained, or that was cut off from NATS while
	// the stream moved on). CompleteFromID is the first id after the
	// gap. See backend.Feed.Evicted (package eventbus/backend).
	ReasonFeedGap = "feed_gap"
	// ReasonQueueOverflow: evicted because the live queue hit its frame limit.
	ReasonQueueOverflow = "queue_overflow"
	// ReasonQueueBytesOverflow: evicted because the live queue hit its byte limit.
	ReasonQueueBytesOverflow = "queue_bytes_overflow"
)

// ResyncData is the payload of a state_resync_required frame.
type ResyncData struct {
	// Reason is one of ReasonEpochReset, ReasonRingEvicted,
	// ReasonReplayBudgetExceeded, ReasonEventsDropped or ReasonFeedGap.
	Reason string `json:"reason"`
	// LastDeliveredID is the last id the subscriber had before the gap: the
	// cursor (ring_evicted, epoch_reset), the last replayed id
	// (replay_budget_exceeded), or the last id the subscriber received
	// before the dropped run (events_dropped) or the gap (feed_gap); 0 when
	// none.
	LastDeliveredID uint64 `json:"lastDeliveredId"`
	// CompleteFromID says where the gap ends: every event in scope with an
	// id ≥ CompleteFromID reaches this subscriber, in order; events with
	// smaller ids may be missing. It is not where a replay starts: events
	// below it can still arrive after this frame (with several sessions in
	// scope, a quiet session's older ids are replayed in id order before
	// it), and they are genuine. For ring_evicted it is the first id held
	// after the newest evicted one; for replay_budget_exceeded the first
	// live id (the events the budget left out, after LastDeliveredID, come
	// only with a resume from LastDeliveredID); for feed_gap the first id
	// after the gap. Omitted when unknown.
	CompleteFromID uint64 `json:"completeFromId,omitempty"`
	// Epoch is the bus epoch (epoch_reset only).
	Epoch string `json:"epoch,omitempty"`
	// FirstDroppedID, LastDroppedID and DroppedCount describe the dropped
	// run (events_dropped only). Ids are not contiguous across sessions, so
	// DroppedCount is the number of this subscriber's events lost.
	FirstDroppedID uint64 `json:"firstDroppedId,omitempty"`
	LastDroppedID  uint64 `json:"lastDroppedId,omitempty"`
	DroppedCount   int    `json:"droppedCount,omitempty"`
	// SkippedCount is the number of events in the replay buffer that the
	// replay budget left out (replay_budget_exceeded only).
	SkippedCount int `json:"skippedCount,omitempty"`
}

// ReplayCompleteData is the payload of a replay_complete frame.
type ReplayCompleteData struct {
	// LastReplayedEventID is the id of the last replayed event, or the
	// cursor when nothing was replayed.
	LastReplayedEventID uint64 `json:"lastReplayedEventId"`
	// ReplayedCount is how many events were replayed.
	ReplayedCount int `json:"replayedCount"`
	// FirstReplayedEventID is the id of the first replayed event; omitted
	// (0) when nothing was replayed.
	FirstReplayedEventID uint64 `json:"firstReplayedEventId,omitempty"`
	// HistoryLost reports that events in scope older than the replay —
	// after the cursor, or any at all without one (a late joiner, an
	// epoch_reset) — were evicted before this subscribe: the replay is not
	// the whole history, and a reply longer than the replay buffer starts
	// in its middle. A cursor's ring_evicted frame announced the same
	// loss; after a snapshot it reports only what the snapshot does not
	// cover. Omitted (false) when the history is whole.
	HistoryLost bool `json:"historyLost,omitempty"`
}

// QueueFigures describes a subscriber's live queue when a frame was made.
type QueueFigures struct {
	QueueSize      int   `json:"queueSize"`      // live frames queued
	MaxQueued      int   `json:"maxQueued"`      // frame limit
	QueuedBytes    int64 `json:"queuedBytes"`    // live data bytes queued
	MaxQueuedBytes int64 `json:"maxQueuedBytes"` // byte limit
}

// SlowClientWarningData is the payload of a slow_client_warning frame.
type SlowClientWarningData struct {
	QueueFigures
	// LastEventID is the id of the newest event queued for the subscriber.
	LastEventID uint64 `json:"lastEventId"`
	// Threshold is "frames", "bytes" or "frames_and_bytes": which limit
	// reached 75 %.
	Threshold string `json:"threshold"`
}

// ClientEvictedData is the payload of a client_evicted frame.
type ClientEvictedData struct {
	QueueFigures
	// Reason is ReasonQueueOverflow or ReasonQueueBytesOverflow.
	Reason string `json:"reason"`
	// DroppedAfter is the id of the first event the subscriber did NOT get:
	// the event that overflowed the queue. Resume with Last-Event-ID =
	// DroppedAfter-1 (or the last id actually received) to get it from the
	// replay buffer.
	DroppedAfter uint64 `json:"droppedAfter"`
}

// SessionClosedData is the payload of a session_closed event.
type SessionClosedData struct {
	// Session is the closed session's id.
	Session string `json:"session"`
	// Reason is "closed" for eventbus.Bus.CloseSession.
	Reason string `json:"reason"`
}

// Reserved reports whether typ is one of the bus's own frame types —
// state_resync_required, replay_complete, slow_client_warning,
// client_evicted, session_closed, snapshot, the turn records turn_start,
// turn_end and turn_cancel, presence, and the handlers' stream_start and
// many-sessions frames (connection, session_added, session_removed,
// session_error) —
// or starts with "_replaybus.". Publish
// refuses them, so a publisher cannot forge a protocol frame (a real event
// with an id that a client would take for the end of its session, say).
func Reserved(typ string) bool {
	switch typ {
	case TypeStateResyncRequired, TypeReplayComplete, TypeSlowClientWarning, TypeClientEvicted, TypeSessionClosed, TypeSnapshot, typeStreamStart,
		TypeTurnStart, TypeTurnEnd, TypeTurnCancel, TypePresence,
		"connection", "session_added", "session_removed", "session_error":
		return true
	}
	return strings.HasPrefix(typ, "_replaybus.")
}
