package config

import "time"

// Prefix is the prefix of every environment variable this package reads.
// The names are in AgentPool's namespace and follow its setting names
// (AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE is its eventbus_replay_buffer_size),
// but AgentPool itself reads none of them: it takes those settings from its
// YAML manifest and the EventBus constructor. [Load] treats every variable
// with this prefix as its own and refuses the ones it does not know.
const Prefix = "AGENTPOOL_EVENTBUS_"

// OverflowPolicy says what the bus does when a subscriber's live queue is
// full. The names are AgentPool's; [OverflowPolicy.Validate] accepts the three
// constants below and nothing else. The zero value "" inside a [Config]
// means "not set": the default rule of Config.OverflowPolicy applies.
type OverflowPolicy string

// The overflow policies. "block" is deliberately absent: it would stall the
// publisher on one slow subscriber.
const (
	// DropSubscriber evicts the subscriber with a client_evicted frame; the
	// client resumes from the replay buffer (qwen-code's behaviour; also
	// AgentPool's, without the frame). The SSE handler's default.
	DropSubscriber OverflowPolicy = "drop_subscriber"
	// DropOldest drops the oldest queued live event to make room and
	// announces the loss with state_resync_required{events_dropped}.
	// AgentPool's default, and ours for in-process subscribers.
	DropOldest OverflowPolicy = "drop_oldest"
	// DropNewest drops the incoming event and announces the loss with
	// state_resync_required{events_dropped}.
	DropNewest OverflowPolicy = "drop_newest"
)

// Defaults, as AgentPool and qwen-code ship them. [Config.WithDefaults]
// puts them into zero fields.
const (
	// DefaultReplayBufferSize is 100 events per session, AgentPool's
	// eventbus_replay_buffer_size.
	DefaultReplayBufferSize = 100
	// DefaultMaxQueueSize is 1000 frames per subscriber, AgentPool's
	// max_queue_size.
	DefaultMaxQueueSize = 1000
	// DefaultMaxQueuedBytes is 2 MiB of event data per subscriber.
	DefaultMaxQueuedBytes = 2 << 20
	// DefaultMaxSubscribers is 64 subscribers per session, qwen-code's
	// maxSubscribers.
	DefaultMaxSubscribers = 64
	// DefaultSessionTTL is one hour of idleness before a session expires.
	DefaultSessionTTL = time.Hour
	// DefaultReplayBudgetBytes is 8 MiB of event data replayed per
	// subscribe.
	DefaultReplayBudgetBytes = 8 << 20
	// DefaultOverflowPolicy is [DropOldest], AgentPool's default
	// (EventBus(overflow_policy="drop_oldest")): the policy of an
	// in-process subscriber when neither the subscription nor the
	// configuration sets one. Streaming adapters use
	// [DefaultStreamOverflowPolicy] instead; see Config.OverflowPolicy.
	DefaultOverflowPolicy = DropOldest
	// DefaultStreamOverflowPolicy is [DropSubscriber], qwen-code's
	// behaviour: the policy of an SSE (or other network stream)
	// subscriber when the configuration does not set one — its client
	// resumes by itself from the replay buffer with Last-Event-ID, which
	// loses nothing, where dropping would leave a gap to repair.
	DefaultStreamOverflowPolicy = DropSubscriber
	// DefaultNATSRetention is 20: the NATS JetStream stream keeps 20
	// replay buffers' worth of events per session (2000 with the default
	// buffer), so a node may lag that far behind one session before it
	// loses events (measured in docs/distributed.md).
	DefaultNATSRetention = 20
	// DefaultClosedRetention is 10 minutes: how long a closed sub-agent
	// session's replay buffer stays readable for the scopes of its
	// still-open ancestors.
	DefaultClosedRetention = 10 * time.Minute
	// DefaultMaxRetained is 1000 closed sessions' replay buffers kept at
	// once per bus.
	DefaultMaxRetained = 1000
)

// Config is the bus configuration. A zero field means its documented
// default, so Config{} is a valid configuration; [Load] fills it from the
// AGENTPOOL_EVENTBUS_* variables and [LoadWith] lets a program set fields
// that win over them. [Config.Validate] checks the ranges. Each field's env
// tag is its variable name without [Prefix].
//
// A Config is a plain value: copying it is safe, and so is sharing it
// between goroutines that do not modify it.
type Config struct {
	// ReplayBufferSize is the number of events kept per session for replay
	// (AgentPool's eventbus_replay_buffer_size). Range 1–1,000,000; zero
	// means 100. Env: AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE.
	ReplayBufferSize int `env:"REPLAY_BUFFER_SIZE"`

	// MaxQueueSize is the default live-queue limit per subscriber, in frames
	// (AgentPool's max_queue_size). Replay and synthetic frames do not count.
	// Range 1–1,000,000; zero means 1000. Env: AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE.
	MaxQueueSize int `env:"MAX_QUEUE_SIZE"`

	// MaxQueuedBytes is the default live-queue limit per subscriber, in bytes
	// of event data; one event larger than it is still admitted into an
	// empty queue. Range 1 B–1 GiB; zero means 2 MiB.
	// Env: AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES, an integer number of bytes
	// or one with a unit: 512KiB, 2MiB, 1GiB, 100KB (KB/MB/GB are powers of
	// 1000, KiB/MiB/GiB powers of 1024).
	MaxQueuedBytes int64 `env:"MAX_QUEUED_BYTES"`

	// MaxSubscribers caps concurrent subscribers per session (qwen-code's
	// maxSubscribers). Range 1–1,000,000; zero means 64.
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
	// is zero — in-process subscribers get drop_oldest (AgentPool's
	// default, [DefaultOverflowPolicy]) and the SSE handler's subscribers
	// get drop_subscriber ([DefaultStreamOverflowPolicy]: its clients
	// resume by themselves). Zero stays zero through WithDefaults and
	// Load, so that eventbus.Bus.OverflowPolicySet can tell an adapter
	// which case holds.
	OverflowPolicy OverflowPolicy `env:"OVERFLOW_POLICY"`

	// DroppableTypes lists event types that may be dropped for a slow
	// subscriber (OpenClaw's dropIfSlow), e.g. streaming text deltas.
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

	// NATSRetention is used by the bus over NATS JetStream (adapters/nats)
	// only: the stream keeps NATSRetention × ReplayBufferSize events per
	// session (its MaxMsgsPerSubject), while each node's replay buffer
	// stays ReplayBufferSize. The surplus is how far a node may fall behind
	// one session before events are deleted that it has not read (which it
	// then announces: state_resync_required{feed_gap}). Range 1–1000; zero
	// means 20. Env: AGENTPOOL_EVENTBUS_NATS_RETENTION.
	NATSRetention int `env:"NATS_RETENTION"`

	// NATSMaxAge is used by the bus over NATS JetStream only: the stream
	// deletes events older than this (its MaxAge), bounding storage
	// although closed sessions' subjects are never purged. Zero (the
	// default) keeps events until NATSRetention drops them. Range 0 or
	// 1s–8760h. Env: AGENTPOOL_EVENTBUS_NATS_MAX_AGE (a Go duration such as
	// "24h").
	NATSMaxAge time.Duration `env:"NATS_MAX_AGE"`

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
}
