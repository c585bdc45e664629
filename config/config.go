package config

import "time"

// Prefix is the prefix of every environment variable this package reads.
const Prefix = "AGENTPOOL_EVENTBUS_"

// OverflowPolicy says what the bus does when a subscriber's live queue is
// full. The names are AgentPool's.
type OverflowPolicy string

// The overflow policies. "block" is deliberately absent: it would stall the
// publisher on one slow subscriber.
const (
	// DropSubscriber evicts the subscriber with a client_evicted frame; the
	// client resumes from the replay buffer (qwen-code's behaviour). Default.
	DropSubscriber OverflowPolicy = "drop_subscriber"
	// DropOldest drops the oldest queued live event to make room and
	// announces the loss with state_resync_required{events_dropped}.
	DropOldest OverflowPolicy = "drop_oldest"
	// DropNewest drops the incoming event and announces the loss with
	// state_resync_required{events_dropped}.
	DropNewest OverflowPolicy = "drop_newest"
)

// Defaults, as AgentPool and qwen-code ship them.
const (
	DefaultReplayBufferSize  = 100
	DefaultMaxQueueSize      = 1000
	DefaultMaxQueuedBytes    = 2 << 20 // 2 MiB
	DefaultMaxSubscribers    = 64
	DefaultSessionTTL        = time.Hour
	DefaultReplayBudgetBytes = 8 << 20 // 8 MiB
	DefaultOverflowPolicy    = DropSubscriber
)

// Config is the bus configuration. A zero field means its documented
// default, so Config{} is a valid configuration; [Load] fills it from
// AGENTPOOL_EVENTBUS_* variables.
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
	// Env: AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES.
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

	// OverflowPolicy is the default overflow policy for subscribers.
	// Zero means drop_subscriber. Env: AGENTPOOL_EVENTBUS_OVERFLOW_POLICY.
	OverflowPolicy OverflowPolicy `env:"OVERFLOW_POLICY"`

	// DroppableTypes lists event types that may be dropped for a slow
	// subscriber (OpenClaw's dropIfSlow), e.g. streaming text deltas.
	// Default none. Env: AGENTPOOL_EVENTBUS_DROPPABLE_TYPES, comma-separated.
	DroppableTypes []string `env:"DROPPABLE_TYPES"`

	// ReplayBudgetBytes caps the bytes of event data one subscribe replays;
	// at least one event is always replayed. Range 1 B–1 GiB; zero means
	// 8 MiB. Env: AGENTPOOL_EVENTBUS_REPLAY_BUDGET_BYTES.
	ReplayBudgetBytes int64 `env:"REPLAY_BUDGET_BYTES"`

	// DisableSlowClientWarning turns the slow_client_warning frame off by
	// default (subscribers can still opt in). Default false (warnings on).
	// Env: AGENTPOOL_EVENTBUS_DISABLE_SLOW_CLIENT_WARNING.
	DisableSlowClientWarning bool `env:"DISABLE_SLOW_CLIENT_WARNING"`
}
