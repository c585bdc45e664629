package eventbus

import (
	"time"

	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/scope"
)

// SubscribeOptions configure one subscription. The zero value subscribes to
// the session alone, replays its whole replay buffer, and uses the bus's
// queue limits and overflow policy.
type SubscribeOptions struct {
	// Scope selects which sessions' events arrive; zero is scope.Session.
	Scope scope.Kind

	// Cursor, when non-nil, is the client's position: replay only events
	// with id > Cursor.ID, emit state_resync_required when events after it
	// are gone (ring_evicted) or when it is from another epoch or at/after
	// the next id (epoch_reset, always the first frame: then the whole
	// history in scope is replayed, or a snapshot and the events after it
	// when a provider is set and that history is no longer whole), and end
	// the replay with replay_complete even when nothing was replayed. nil
	// replays the whole history in scope,
	// ended by replay_complete{historyLost} only when older events in
	// scope were evicted.
	Cursor *Position

	// StrictCursor makes Subscribe fail with a [*PositionLostError]
	// (reason ring_evicted or epoch_reset) where Cursor's position is lost,
	// instead of returning a subscription that starts with
	// state_resync_required (or, with a snapshot provider, a snapshot): for
	// a reader that must answer "gone" rather than read on. No effect
	// without Cursor.
	StrictCursor bool

	// NoReplay skips the history entirely: only events published after the
	// subscribe arrive, and no resync or replay_complete frame precedes
	// them. It wins over Cursor.
	NoReplay bool

	// MaxQueued overrides the live-queue frame limit; 0 uses the bus's
	// MaxQueueSize. Range 1–1,000,000.
	MaxQueued int
	// MaxQueuedBytes overrides the live-queue byte limit; 0 uses the bus's.
	MaxQueuedBytes int64
	// Policy overrides the overflow policy; "" uses the bus's (see
	// [Options.OverflowPolicy] for the default rule: drop_oldest for
	// in-process subscribers, drop_subscriber for the SSE handler when the
	// bus's policy was not set explicitly).
	Policy OverflowPolicy
	// SlowClientWarning overrides whether slow_client_warning frames are
	// sent: nil uses the bus's setting.
	SlowClientWarning *bool

	// RequireSession makes Subscribe fail with ErrSessionNotFound instead of
	// creating the session when it does not exist.
	RequireSession bool

	// Name labels the subscriber in logs, diagnostics and stats (for
	// example the remote address); it need not be unique.
	Name string

	// Coalesce, when set, turns on subscriber-side coalescing: each time the
	// consumer takes a frame it takes everything already queued and merges
	// consecutive events with the same merge key into one (see [Coalescer];
	// package coalesce has rule sets). Nil (the default) delivers every
	// event as published.
	Coalesce Coalescer
	// Types, when not empty, selects the event types the subscriber
	// receives, in the replay and live: events of other types are neither
	// replayed nor queued
	// (nor count against its limits). session_closed and the bus's own
	// frames always arrive. The cursor stays the last id delivered: a
	// resume with the same Types neither repeats nor skips an event of
	// those types, and ring_evicted is announced only when events of those
	// types were lost after the cursor (or history of unknown type: a
	// backend's gap, a closed session's). At most 64 entries, each
	// non-empty and free of white space and control characters. Nil (the
	// default) receives every type. Over SSE and WebSocket: ?types=a,b.
	Types []string

	// Snapshot asks for a snapshot frame at join: with the bus's
	// [Options.Snapshots] provider set, the subscriber first receives the
	// application's state as of an id, then exactly the events after it
	// (the cursor is replaced by that id). Without a provider it does
	// nothing. A subscriber whose position is lost (ring_evicted; or
	// epoch_reset, when the new history in scope is no longer whole) gets a
	// snapshot without asking. Over SSE and WebSocket: ?snapshot=1.
	Snapshot bool

	// Client is the id of the client the subscription attaches as, for
	// presence: its subscriptions count as one client, and its leave
	// waits Options.PresenceGrace so a reconnect within it changes
	// nothing. "" is an anonymous subscriber: it counts, but a reconnect
	// cannot be told from a new one (it leaves and joins). The rules of a
	// session id apply. Over SSE and WebSocket: ?client=.
	Client string
	// Presence asks for presence frames: the session's presence first
	// (before any replay), then one per change (frame.PresenceData). Off
	// by default. Over SSE and WebSocket: ?presence=1.
	Presence bool

	// Sessions, when not empty, adds these sessions, each with its scope
	// (scope.All refused), to the session Subscribe names with Scope: one
	// subscription delivers the events of every session of the set in id
	// order, so one Cursor resumes them all (docs/protocol.md, "Many
	// sessions on one connection"). Resync frames name their session;
	// replay_complete and queue frames carry "" as session. Every session
	// must exist unless created as Subscribe creates one; with
	// RequireSession an unknown one fails the whole call, naming it.
	// Refused (ErrInvalid) beside Snapshot, Client or Presence. Only the
	// named session's subscriber cap counts it. While such a subscription
	// exists, publishes take the ordering step of scope.All.
	Sessions map[string]scope.Kind
	// Floors, with Cursor, gives sessions of the set their own position:
	// their events with id > Floors[id] are delivered, in id order with
	// the others', instead of those after Cursor.ID. Ignored after an
	// epoch_reset; a floor for a session outside the set is ErrInvalid.
	// Non-nil (even empty) makes a set of the named session alone.
	Floors map[string]uint64

	// Throttle, with Coalesce set, holds a mergeable live event for up to
	// this long after the previous one was handed out, merging what
	// follows; any other event hands out
	// the held one first. 0 (the default) holds nothing. Range 0–1 min
	// (adapters/sse and adapters/ws allow a client 0–5 s with ?throttle=).
	Throttle time.Duration
}

// PublishOption configures one [Bus.Publish].
type PublishOption func(*publishOptions)

type publishOptions struct {
	origin   string
	existing bool
	producer *producer.Stamp // WithProducer (producer.go)
}

// Existing makes Publish refuse, with ErrSessionNotFound, a session the bus
// does not know instead of creating it (the default), so that a mistyped
// session id is an error, not a new session.
func Existing() PublishOption { return func(o *publishOptions) { o.existing = true } }

// WithOrigin stamps the event with the id of the client that caused it
// ([Event.Origin]).
func WithOrigin(origin string) PublishOption { return func(o *publishOptions) { o.origin = origin } }
