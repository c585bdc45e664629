package eventbus

import (
	"github.com/replaybus/replaybus/scope"

	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// OverflowPolicy says what the bus does when a subscriber's live queue is
// full. [Options.Validate] accepts the three constants below and nothing
// else. The zero value "" inside an [Options]
// means "not set": the default rule of Options.OverflowPolicy applies.
type OverflowPolicy string

// The overflow policies. "block" is deliberately absent: it would stall the
// publisher on one slow subscriber.
const (
	// DropSubscriber evicts the subscriber with a client_evicted frame; the
	// client resumes from the replay buffer. The SSE handler's default.
	DropSubscriber OverflowPolicy = "drop_subscriber"
	// DropOldest drops the oldest queued live event to make room and
	// announces the loss with state_resync_required{events_dropped}.
	// The default for in-process subscribers.
	DropOldest OverflowPolicy = "drop_oldest"
	// DropNewest drops the incoming event and announces the loss with
	// state_resync_required{events_dropped}.
	DropNewest OverflowPolicy = "drop_newest"
)

// Defaults (docs/python-parity.md says where each comes from);
// [Options.WithDefaults] puts them into zero fields.
const (
	// defaultReplayBufferSize is 100 events per session.
	defaultReplayBufferSize = 100
	// defaultMaxQueueSize is 1000 frames per subscriber.
	defaultMaxQueueSize = 1000
	// defaultMaxQueuedBytes is 2 MiB of event data per subscriber.
	defaultMaxQueuedBytes = 2 << 20
	// defaultMaxSubscribers is 64 subscribers per session.
	defaultMaxSubscribers = 64
	// defaultSessionTTL is one hour of idleness before a session expires.
	defaultSessionTTL = time.Hour
	// defaultReplayBudgetBytes is 8 MiB of event data replayed per
	// subscribe.
	defaultReplayBudgetBytes = 8 << 20
	// defaultOverflowPolicy is [DropOldest]: the policy of an
	// in-process subscriber when neither the subscription nor the
	// configuration sets one. Streaming adapters use drop_subscriber
	// instead; see Options.OverflowPolicy.
	defaultOverflowPolicy = DropOldest
	// defaultClosedRetention is 10 minutes: how long a closed sub-agent
	// session's replay buffer stays readable for the scopes of its
	// still-open ancestors.
	defaultClosedRetention = 10 * time.Minute
	// defaultMaxRetained is 1000 closed sessions' replay buffers kept at
	// once per bus.
	defaultMaxRetained = 1000
	// defaultPresenceGrace is 15 s: how long a client's last subscription
	// counts as attached after it ends (a reconnect within it is no
	// leave and join).
	defaultPresenceGrace = 15 * time.Second
	// defaultCancelHold is 30 s: how long a cancel of a turn not yet
	// started is held.
	defaultCancelHold = 30 * time.Second
	// defaultTurnLease is 5 s: the lease on a node's turns and presence
	// over a backend that has leases.
	defaultTurnLease = 5 * time.Second
)

// Options configure a [Bus] (see [New]): the one configuration struct of
// the bus. A zero field means its documented default, so Options{} is a
// valid configuration. The bus never reads the environment; the config
// package fills an Options from the AGENTPOOL_EVENTBUS_* variables (each
// field's env tag is its variable name without that prefix; "-" marks
// the fields only code can set).
// [Options.Validate] checks the ranges.
//
// An Options is a plain value: copying it is safe, and so is sharing it
// between goroutines that do not modify it.
type Options struct {
	// ReplayBufferSize is the number of events kept per session for replay.
	// Range 1–1,000,000; zero means 100, never "no replay" (a subscriber
	// that wants no history sets SubscribeOptions.NoReplay; an explicit 0
	// in the variable is refused with an error naming it).
	// Env: AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE.
	ReplayBufferSize int `env:"REPLAY_BUFFER_SIZE"`

	// MaxQueueSize is the default live-queue limit per subscriber, in frames.
	// Replay and synthetic frames do not count.
	// Range 1–1,000,000; zero means 1000. Env: AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE.
	MaxQueueSize int `env:"MAX_QUEUE_SIZE"`

	// MaxQueuedBytes is the default live-queue limit per subscriber, in bytes
	// of event data; one event larger than it is still admitted into an
	// empty queue. Range 1 B–1 GiB; zero means 2 MiB.
	// Env: AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES, an integer number of bytes
	// or one with a unit: 512KiB, 2MiB, 1GiB, 100KB (KB/MB/GB are powers of
	// 1000, KiB/MiB/GiB powers of 1024).
	MaxQueuedBytes int64 `env:"MAX_QUEUED_BYTES"`

	// MaxSubscribers caps concurrent subscribers per session. Range
	// 1–1,000,000; zero means 64.
	// Env: AGENTPOOL_EVENTBUS_MAX_SUBSCRIBERS.
	MaxSubscribers int `env:"MAX_SUBSCRIBERS"`

	// SessionTTL is how long a session may stay idle (no publish, no
	// subscriber of its own) before it is expired and its replay buffer
	// freed; it is also how long a closed session's id is remembered.
	// Range 1s–8760h; zero means 1h. Env: AGENTPOOL_EVENTBUS_SESSION_TTL
	// (a Go duration such as "30m").
	SessionTTL time.Duration `env:"SESSION_TTL"`

	// OverflowPolicy is the overflow policy for subscribers: one of
	// drop_subscriber, drop_oldest, drop_newest ("block" is refused).
	// Env: AGENTPOOL_EVENTBUS_OVERFLOW_POLICY.
	//
	// The default rule, stated once here: a subscription's own
	// SubscribeOptions.Policy wins; else a policy set here (by the
	// variable or in code) applies to every subscriber; else — the field
	// is zero — in-process subscribers get drop_oldest and the SSE and
	// WebSocket handlers' subscribers get
	// drop_subscriber (their clients
	// resume by themselves). Zero stays zero through WithDefaults; a bus
	// made with it reports drop_oldest in [Bus.Options] (the policy in
	// force in process) and false from [Bus.OverflowPolicySet], so that an
	// adapter can tell which case holds.
	OverflowPolicy OverflowPolicy `env:"OVERFLOW_POLICY"`

	// DroppableTypes lists event types that may be dropped for a slow
	// subscriber, e.g. streaming text deltas.
	// Default none. Entries must be non-empty and free of white space and
	// control characters. Env: AGENTPOOL_EVENTBUS_DROPPABLE_TYPES,
	// comma-separated; entries are trimmed, empty entries and duplicates
	// are skipped.
	DroppableTypes []string `env:"DROPPABLE_TYPES"`

	// ReplayBudgetBytes caps the bytes of event data one subscribe replays;
	// at least one event is always replayed. Range 1 B–1 GiB; zero means
	// 8 MiB. Env: AGENTPOOL_EVENTBUS_REPLAY_BUDGET_BYTES, a byte size as for
	// MaxQueuedBytes.
	ReplayBudgetBytes int64 `env:"REPLAY_BUDGET_BYTES"`

	// DisableSlowClientWarning turns the slow_client_warning frame off by
	// default (subscribers can still opt in). Default false (warnings on).
	// Env: AGENTPOOL_EVENTBUS_DISABLE_SLOW_CLIENT_WARNING, a Go boolean
	// (true, false, 1, 0, t, f).
	DisableSlowClientWarning bool `env:"DISABLE_SLOW_CLIENT_WARNING"`

	// ClosedRetention is how long the replay buffer of a closed session
	// that had a parent stays readable for the descendants and all scopes
	// of its still-open ancestors, so that a client of the tree that
	// resumes after a sub-agent finished loses nothing. The buffer goes
	// earlier when the tree's root closes (nothing is left to resume into)
	// or when MaxRetained is reached (the oldest goes first); a resume that
	// needed it is then told with ring_evicted. Range 1s–8760h; zero means
	// 10m. Env: AGENTPOOL_EVENTBUS_CLOSED_RETENTION (a Go duration).
	ClosedRetention time.Duration `env:"CLOSED_RETENTION"`

	// MaxRetained caps how many closed sessions' replay buffers a bus
	// keeps for ClosedRetention, bounding that memory to MaxRetained ×
	// ReplayBufferSize events. Range 1–1,000,000; zero means 1000.
	// Env: AGENTPOOL_EVENTBUS_MAX_RETAINED.
	MaxRetained int `env:"MAX_RETAINED"`

	// ReplayMaxBytes, when above 0, bounds the bytes of event data each
	// session's replay buffer holds: the oldest events (or folded records,
	// see ReplayCompact) go until the rest fit, the newest one always
	// stays. Together with ReplayBufferSize and ReplayMaxAge, whichever
	// binds first evicts the oldest; a resume that needed an evicted event
	// gets state_resync_required{ring_evicted} as always. Range 0 or
	// 1 B–1 GiB; zero (the default: a count-only ring) bounds
	// nothing. Env: AGENTPOOL_EVENTBUS_REPLAY_MAX_BYTES, a byte size as
	// for MaxQueuedBytes.
	ReplayMaxBytes int64 `env:"REPLAY_MAX_BYTES"`

	// ReplayMaxAge, when above 0, bounds how long an event stays in its
	// session's replay buffer (a folded record: counted from its newest
	// event); older ones go at the session's next publish or subscribe,
	// announced as ReplayMaxBytes says. Idle sessions still expire after
	// SessionTTL. Range 0 or 1s–8760h; zero (the default) bounds nothing.
	// Over NATS the stream's MaxAge follows it (see adapters/nats).
	// Env: AGENTPOOL_EVENTBUS_REPLAY_MAX_AGE (a Go duration such as "10m").
	ReplayMaxAge time.Duration `env:"REPLAY_MAX_AGE"`

	// PresenceGrace is how long a client id counts as attached to a
	// session after its last subscription ended: a reconnect within it
	// shows neither a leave nor a join (SubscribeOptions.Client). Range
	// 100ms–1h; zero means 15s. Env: AGENTPOOL_EVENTBUS_PRESENCE_GRACE.
	PresenceGrace time.Duration `env:"PRESENCE_GRACE"`

	// CancelHold is how long a cancel of a turn a session does not know
	// (not started yet: on another node, or a client-chosen id whose
	// start is in flight) is held, to apply when the turn starts; at most
	// 16 are held per session. Range 1s–1h; zero means 30s.
	// Env: AGENTPOOL_EVENTBUS_CANCEL_HOLD.
	CancelHold time.Duration `env:"CANCEL_HOLD"`

	// TurnLease is the lease on the turns a node runs and on its part of
	// presence, over a backend that has leases (backend.LeaseBackend,
	// adapters/nats): a node that dies without a goodbye has its turns
	// ended (turn_end{producer_lost}) and its clients leave within twice
	// the lease. Range 1s–5m; zero means 5s. Unused in memory.
	// Env: AGENTPOOL_EVENTBUS_TURN_LEASE.
	TurnLease time.Duration `env:"TURN_LEASE"`

	// ReplayCompact, when set, compacts each session's replay buffer with
	// this rule set (package coalesce has them): an event that merges with
	// the session's newest stored one (same type, origin and merge key)
	// folds into it, so a streamed reply of many deltas is one record. Live
	// delivery is unchanged; a replay hands a folded record out as one event
	// with the newest id, Count and FirstID, or for a cursor inside it the
	// merge of its events after the cursor. Merge must be a fold. A record
	// holds at most 4096 events or 1 MiB. A rule set with TextSpan and
	// JoinText methods (coalesce.Set) has its text deltas stored as text.
	// Nil (the default) stores every event. Env:
	// AGENTPOOL_EVENTBUS_REPLAY_COMPACT = off, acp or agentpool (read by
	// package config).
	ReplayCompact Coalescer `env:"-"`

	// Snapshots, if set, is the application's snapshot provider: a
	// subscriber whose position is lost (its resume would get
	// state_resync_required with ring_evicted or epoch_reset) or that asks
	// at join (SubscribeOptions.Snapshot, ?snapshot=1) receives one
	// snapshot frame — the state the provider returns and the id it
	// reflects — and then exactly the events after that id: no gap, no
	// duplicate at the seam (the replay after the id is taken under the
	// same lock as the subscriber's registration). Should events after
	// that id be gone by the time the subscriber registers (a publisher
	// ran a whole buffer ahead meanwhile), the provider is asked again, at
	// most three times per subscribe; then ring_evicted follows the
	// snapshot as usual. It is called with no bus lock held.
	// Nil (the default): no snapshot frame, today's resync frames.
	//
	// The provider returns the application's state of session, as a
	// subscription of scope sc covers it (scope.Session: that session
	// alone; scope.Descendants: it and every session below it; …), as of an event id: state is any JSON value (the
	// transcript so far, say), asOf the id of the newest event it reflects
	// — every event in the subscription's scope up to asOf is in state,
	// none after it, and nothing of a session outside that scope. asOf
	// must be an id the bus already gave (0: no event yet). It runs on the
	// subscriber's goroutine, with no bus lock held, and may call back
	// into the bus; ctx is the subscribe's context. An error (or an asOf
	// the bus has not reached) makes the subscribe go on without a
	// snapshot, as without a provider.
	Snapshots func(ctx context.Context, session string, sc scope.Kind) (state json.RawMessage, asOf uint64, err error) `env:"-"`

	// Logger receives log records about slow clients, evictions, drops and
	// session expiry, aggregated and rate-limited: one WARN line per
	// eviction and per drop episode of a subscriber (then at most one per
	// 10 s with the count since), INFO for slow-client warnings and
	// expiries, at most 10 lines per kind per 10 s (the next line says how
	// many were suppressed). Records are written after the bus lock is
	// released, on the goroutine of the call that caused them (Publish,
	// ExpireIdle, a backend's feed). [Bus.Stats] counts every incident
	// exactly. Nil (the default): no logging.
	Logger *slog.Logger `env:"-"`

	// Diagnostics, if set, receives one record per slow-client warning,
	// eviction, drop and session expiry, unaggregated (Logger's are
	// aggregated): message "eventbus: " and slow_client_warning,
	// client_evicted, events_dropped or session_expired; WARN for a drop or
	// an eviction, else INFO; attributes session and, for a subscriber's
	// incident, subscriber, name, event_id, event_type, queue_size,
	// max_queued, queued_bytes, max_queued_bytes. Records are handled on
	// the goroutine of the call that caused them, after the bus lock is
	// released; the handler may call back into the bus. Nil (the default):
	// none.
	Diagnostics *slog.Logger `env:"-"`

	// Epoch fixes the bus epoch (1–64 characters from [A-Za-z0-9_])
	// instead of drawing a random one; useful for tests and for a bus that
	// restores state. "" (the default): 16 random hex digits. A bus over a
	// backend takes the backend's epoch and ignores this field.
	Epoch string `env:"-"`

	// SessionController, if set, tells the bus a session's parent: given a
	// session id it returns the parent's id, or "" for a root. It is asked
	// the first time the bus sees the id without being told one: when [Bus.Publish]
	// or [Bus.Subscribe] creates the session implicitly (CreateSession
	// names the parent itself and is not asked). The answer places the
	// session in the tree from its first event, so descendants and subtree
	// subscribers hear it at once. A parent the bus does not know is
	// created the same way (asking in turn for its parent, at most 64
	// levels up); a parent that is closed, that would close a cycle, or
	// that is not a valid session id is ignored and the session starts as
	// a root (attach it later with CreateSession). It is asked once per id.
	//
	// It runs with the structure lock held exclusively (every publisher
	// waits), on the goroutine of the call that created the session: it
	// must be quick and must not call back into the bus. A panic in it is
	// recovered (the lock is released): the Publish or Subscribe that
	// would have created the session returns an ErrInvalid error naming
	// the panic, and the session is not created. Nil (the default):
	// implicit sessions are roots.
	SessionController func(sessionID string) (parentID string) `env:"-"`

	// now is the bus's clock; nil is time.Now (set by tests).
	now func() time.Time
}
