package eventbus

import (
	"encoding/json"
	"time"
)

// Event is one frame a subscriber receives: a published event, a replayed
// copy of one, or a synthetic frame.
//
// Published events have an ID from the bus-wide sequence (1, 2, 3, …, never
// reused within an epoch). Synthetic frames — state_resync_required,
// replay_complete, slow_client_warning, client_evicted — have ID 0: they never
// consume a sequence number and must never move a client's Last-Event-ID.
//
// An Event's payload is JSON unless it was published with
// [Bus.PublishBytes] under another media type ([Event.ContentType],
// [Event.IsJSON]); the zero value is a JSON event.
//
// An Event is a value: the Data bytes are shared by every subscriber and by
// the replay buffer and must not be modified.
type Event struct {
	// ID is the event's position in the bus-wide sequence, from 1; 0 marks a
	// synthetic frame.
	ID uint64 `json:"id,omitempty"`
	// Session is the id of the session the event was published to. For a
	// synthetic frame it is the session the subscription was made on.
	Session string `json:"session"`
	// Type is the event type, e.g. "agent_message_chunk" or one of the
	// Type* constants. Never empty, never contains CR or LF.
	Type string `json:"type"`
	// Data is the payload as JSON, encoded once at publish — or, for an
	// event published with [Bus.PublishBytes] under a media type other
	// than application/json ([Event.IsJSON] false), the bytes as published,
	// of media type [Event.ContentType]. encoding/json cannot marshal such
	// an Event as is (its Data is not JSON); the adapters' envelope
	// (adapters/resume.AppendEnvelope) carries the bytes in base64.
	Data json.RawMessage `json:"data,omitempty"`
	// Time is when the bus accepted the event (synthetic frames: when the
	// frame was made).
	Time time.Time `json:"-"`
	// Origin optionally names the client that caused the event, so a
	// client can recognise its own echoes.
	Origin string `json:"origin,omitempty"`
	// Replay is true on the copy a subscriber receives from the replay
	// buffer rather than live.
	Replay bool `json:"replay,omitempty"`
	// media is the payload's media type, interned (media.go): 0 for JSON.
	// It sits in the padding after Replay, so Event stays 128 bytes.
	media uint32
	// Count is how many published events a coalescing subscription merged
	// into this one (see [SubscribeOptions.Coalesce]): 0 for an event
	// delivered as published, ≥ 2 for a merged one. A merged event carries
	// the LAST merged event's ID (and Time), so resuming from it never
	// replays what it holds.
	Count int `json:"count,omitempty"`
	// FirstID is the id of the first event merged into this one; set only
	// when Count ≥ 2. Ids between FirstID and ID that belong to other
	// sessions or were not in this subscriber's scope are not included.
	FirstID uint64 `json:"firstId,omitempty"`
}
