package eventbus

import (
	"log/slog"
	"time"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/scope"
)

// OverflowPolicy is [config.OverflowPolicy]: what happens when a subscriber's
// live queue is full.
type OverflowPolicy = config.OverflowPolicy

// The overflow policies (AgentPool's names); see [config.OverflowPolicy].
const (
	DropSubscriber = config.DropSubscriber
	DropOldest     = config.DropOldest
	DropNewest     = config.DropNewest
	// DefaultStreamOverflowPolicy is what streaming adapters give their
	// subscribers when the bus's policy was not set: drop_subscriber (see
	// [config.Config.OverflowPolicy] and [Bus.OverflowPolicySet]).
	DefaultStreamOverflowPolicy = config.DefaultStreamOverflowPolicy
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
	// the next id (epoch_reset: the whole history in scope is replayed),
	// and end the replay with replay_complete even when nothing was
	// replayed. nil replays the whole history in scope (AgentPool's
	// last_event_id=None).
	Cursor *Position

	// NoReplay skips the history entirely (AgentPool's
	// subscribe(replay=False)): only events published after the subscribe
	// arrive, and no resync or replay_complete frame precedes them. It wins
	// over Cursor, as AgentPool's replay=False wins over last_event_id.
	NoReplay bool

	// MaxQueued overrides the live-queue frame limit; 0 uses the bus's
	// MaxQueueSize. Range 1–1,000,000.
	MaxQueued int
	// MaxQueuedBytes overrides the live-queue byte limit; 0 uses the bus's.
	MaxQueuedBytes int64
	// Policy overrides the overflow policy; "" uses the bus's (see
	// [config.Config.OverflowPolicy] for the default rule: drop_oldest for
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

	// Coalesce, when set, turns on subscriber-side coalescing (AgentPool's
	// drain_and_merge): each time the consumer takes a frame it takes
	// everything already queued and merges consecutive events with the same
	// merge key into one (see [Coalescer]; the coalesce package has the
	// ACP and AgentPool rule sets). Nil (the default) delivers every event
	// as published.
	Coalesce Coalescer
	// Throttle, with Coalesce set, holds a mergeable live event for up to
	// this long after the previous one was handed out, merging what follows
	// (OpenClaw's 150 ms chat-delta throttle); any other event hands out
	// the held one first. 0 (the default) holds nothing. Range 0–MaxThrottle.
	Throttle time.Duration
}

// Option configures a [Bus] beyond its [config.Config].
type Option func(*options)

type options struct {
	logger   *slog.Logger
	hook     func(Diagnostic)
	epoch    string
	now      func() time.Time
	parentOf SessionController
}

// SessionController tells the bus a session's parent: it returns the
// parent's id, or "" for a root. It is the seam of AgentPool's
// EventBus(session_controller=…), whose get_parent the Python bus consults.
type SessionController func(sessionID string) (parentID string)

// WithSessionController makes the bus ask fn for a session's parent the
// first time it sees the id without being told one: when [Bus.Publish] or
// [Bus.Subscribe] creates the session implicitly. (CreateSession names the
// parent itself and is not asked about.) The answer places the session in
// the tree from its first event, so descendants and subtree subscribers
// hear it at once. A parent the bus does not know is created the same way
// (asking fn for its parent in turn, at most 64 levels up); a parent that
// is closed, that would close a cycle, or that is not a valid session id
// is ignored and the session starts as a root (attach it later with
// CreateSession). AgentPool asks its controller on every routing decision;
// we ask once per id, since the tree only changes through the bus.
//
// fn runs with the structure lock held exclusively (every publisher
// waits), on the goroutine of the call that
// created the session: it must be quick and must not call back into the
// bus. A panic in fn is recovered (the lock is released): the Publish or
// Subscribe that would have created the session returns an ErrInvalid
// error naming the panic, and the session is not created. Default: no controller
// (implicit sessions are roots).
func WithSessionController(fn SessionController) Option {
	return func(o *options) { o.parentOf = fn }
}

// WithLogger sends log records about slow clients, evictions, drops and
// session expiry to l, aggregated and rate-limited: one WARN line per
// eviction and per drop episode of a subscriber (then at most one per 10 s
// with the count since), INFO for slow-client warnings and expiries, at
// most 10 lines per kind per 10 s (the next line says how many were
// suppressed). Records are written after the bus lock is released, on the
// goroutine of the call that caused them (Publish, ExpireIdle, the NATS
// feed). [Bus.Stats] counts every incident exactly. Default: no logging.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDiagnostics calls fn for every slow-client warning, eviction, drop
// and session expiry (see [Diagnostic]), unaggregated. fn runs on the
// goroutine of the call that caused it (Publish, ExpireIdle, the NATS
// feed) after the bus lock is released, before that call returns; it may
// call back into the bus, but a slow fn slows that caller.
func WithDiagnostics(fn func(Diagnostic)) Option { return func(o *options) { o.hook = fn } }

// WithEpoch fixes the bus epoch instead of drawing a random one; useful for
// tests and for a bus that restores state. It must be 1–64 characters from
// [A-Za-z0-9_].
func WithEpoch(epoch string) Option { return func(o *options) { o.epoch = epoch } }

// PublishOption configures one [Bus.Publish].
type PublishOption func(*publishOptions)

type publishOptions struct {
	origin   string
	existing bool
}

// Existing makes Publish refuse, with ErrSessionNotFound, a session the bus
// does not know instead of creating it (the default, AgentPool's
// create-on-first-publish). A server that publishes on a client's behalf
// uses it so that a mistyped session id is an error, not a new session.
func Existing() PublishOption { return func(o *publishOptions) { o.existing = true } }

// WithOrigin stamps the event with the id of the client that caused it
// (qwen-code's originatorClientId).
func WithOrigin(origin string) PublishOption { return func(o *publishOptions) { o.origin = origin } }

// DiagnosticKind says what a [Diagnostic] reports.
type DiagnosticKind string

// Diagnostic kinds.
const (
	DiagSlowClientWarning DiagnosticKind = "slow_client_warning"
	DiagEvicted           DiagnosticKind = "client_evicted"
	DiagDropped           DiagnosticKind = "events_dropped"
	DiagSessionExpired    DiagnosticKind = "session_expired"
)

// Diagnostic reports one backpressure incident to the hook given with
// [WithDiagnostics].
type Diagnostic struct {
	Kind       DiagnosticKind // what happened
	Session    string         // the subscription's session (or the expired session)
	Subscriber uint64         // the subscriber's id, 0 for session_expired
	Name       string         // the subscriber's Name
	EventID    uint64         // the event that triggered it
	EventType  string         // that event's type
	Queue      QueueFigures   // the subscriber's live queue right after it (zero for session_expired)
}
