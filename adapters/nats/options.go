package nats

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the options.
const (
	// DefaultStream is the JetStream stream a bus uses unless [WithStream]
	// names another.
	DefaultStream = "REPLAYBUS"
	// DefaultSubjectPrefix is the first subject token of every event
	// unless [WithSubjectPrefix] sets another.
	DefaultSubjectPrefix = "replaybus"
	// DefaultPublishTimeout bounds one JetStream publish (waiting for its
	// ack) unless [WithPublishTimeout] sets another.
	DefaultPublishTimeout = 5 * time.Second
	// DefaultHeartbeat is the idle heartbeat of the node's consumer: two
	// missed heartbeats make it re-create the consumer. The consumer has
	// one replica, on one server of the stream's, which need not be the
	// server the node is connected to: when that server dies, nothing else
	// tells the node (its connection stays up), so the heartbeat bounds how
	// long its live readers wait: 2 s, within a failover (an election of
	// the stream's leader takes 4–9 s). It was 5 s, which with the
	// re-creation left readers without events for 15–30 s after a kill.
	DefaultHeartbeat = time.Second
	// DefaultRetention is how many replay buffers' worth of events per
	// session the stream keeps unless [WithRetention] sets another: 20
	// (2000 events with the default buffer of 100), so a node may lag
	// that far behind one session before it loses events (measured in
	// docs/distributed.md).
	DefaultRetention = 20
)

// Option configures [New], [Connect] and [NewBackend].
type Option func(*options)

type options struct {
	stream         string
	prefix         string
	replicas       int
	storage        jetstream.StorageType
	publishTimeout time.Duration
	heartbeat      time.Duration
	maxAge         time.Duration
	maxAgeSet      bool
	retention      int // replay buffers per session
	logger         *slog.Logger
}

func defaultOptions() options {
	return options{
		stream:         DefaultStream,
		prefix:         DefaultSubjectPrefix,
		replicas:       1,
		storage:        jetstream.FileStorage,
		publishTimeout: DefaultPublishTimeout,
		heartbeat:      DefaultHeartbeat,
		retention:      DefaultRetention,
	}
}

func (o *options) validate() error {
	if err := checkStreamName(o.stream); err != nil {
		return err
	}
	if err := checkPrefix(o.prefix); err != nil {
		return err
	}
	if o.replicas < 1 || o.replicas > 5 {
		return fmt.Errorf("nats: replicas %d out of range [1, 5]", o.replicas)
	}
	if o.storage != jetstream.FileStorage && o.storage != jetstream.MemoryStorage {
		return fmt.Errorf("nats: unknown storage type %v", o.storage)
	}
	if o.publishTimeout <= 0 {
		return fmt.Errorf("nats: publish timeout %v must be positive", o.publishTimeout)
	}
	if o.maxAge < 0 {
		return fmt.Errorf("nats: max age %v must not be negative", o.maxAge)
	}
	if o.retention < 1 || o.retention > maxRetention {
		return fmt.Errorf("nats: retention %d out of range [1, %d] replay buffers", o.retention, maxRetention)
	}
	if o.heartbeat < 500*time.Millisecond || o.heartbeat > 30*time.Second {
		// The range this option has always had (nats.go's pull
		// consumer, which the node used before, refused any other).
		return fmt.Errorf("nats: heartbeat %v out of range [500ms, 30s]", o.heartbeat)
	}
	return nil
}

// WithMaxAge sets the stream's MaxAge: JetStream deletes events older than
// d, so the stream's storage stays bounded although the subjects of closed
// sessions are never purged (it otherwise keeps up to MaxMsgsPerSubject
// events of every session ever used). Zero keeps events until the
// per-subject limit drops them. Without this option the MaxAge is the
// retention ([WithRetention]) × eventbus.Options.ReplayMaxAge (the replay
// window's age bound, as the per-subject count is the retention ×
// ReplayBufferSize; 0 when the window has none). Operators set it with
// AGENTPOOL_EVENTBUS_NATS_MAX_AGE, which config.LoadNATS reads and the
// program passes here (as the example server does). A node
// that starts after events aged out announces the loss to resuming clients
// (ring_evicted) as for any event the stream no longer holds; a running
// node keeps its own replay buffers. A good value is a few times the
// session TTL, and always far more than a node can lag.
func WithMaxAge(d time.Duration) Option {
	return func(o *options) { o.maxAge, o.maxAgeSet = d, true }
}

// WithRetention sets how many replay buffers' worth of events per session
// the stream keeps: MaxMsgsPerSubject = n × ReplayBufferSize, n in 1–1000.
// Without this option it is [DefaultRetention]; operators set it with
// AGENTPOOL_EVENTBUS_NATS_RETENTION, which config.LoadNATS reads and the
// program passes here (as the example server does). Each node's replay
// buffer stays ReplayBufferSize, the replay window; the surplus is how far
// a node may fall behind one session before JetStream deletes events it has
// not read, which the node then announces to its live subscribers
// (state_resync_required{feed_gap}) and resumes (ring_evicted). Storage
// grows with n: see docs/distributed.md for sizing.
func WithRetention(n int) Option {
	return func(o *options) { o.retention = n }
}

// WithStream names the JetStream stream (1–64 characters from
// [A-Za-z0-9_-]); default [DefaultStream]. Every node of one bus uses the
// same stream; buses that share a NATS system use different streams and
// different subject prefixes.
func WithStream(name string) Option { return func(o *options) { o.stream = name } }

// WithSubjectPrefix sets the subject prefix (one or more tokens without
// wildcards); default [DefaultSubjectPrefix]. The stream holds the subjects
// <prefix>.>, which no other stream may overlap.
func WithSubjectPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithReplicas sets the stream's replication factor, 1–5 (default 1); a
// NATS cluster of 3 servers with 3 replicas survives the loss of one.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithStorage chooses file (default) or memory storage for the stream.
// Only file storage keeps the history across a restart of the NATS server.
func WithStorage(st jetstream.StorageType) Option { return func(o *options) { o.storage = st } }

// WithPublishTimeout bounds one publish, which waits for JetStream's ack
// (default [DefaultPublishTimeout]); a publish that runs out of it fails
// with an error and may or may not have been stored. It is also the ack
// timeout of a pipelined publish ([eventbus.Pipeline]).
func WithPublishTimeout(d time.Duration) Option { return func(o *options) { o.publishTimeout = d } }

// WithHeartbeat sets the idle heartbeat of the node's consumer, 500ms–30s
// (default [DefaultHeartbeat]):
// a lost consumer is noticed after two missed heartbeats and re-created
// from the last event the node ingested.
func WithHeartbeat(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// maxRetention bounds [WithRetention]: 1000 replay buffers (the range
// config.LoadNATS checks AGENTPOOL_EVENTBUS_NATS_RETENTION against).
const maxRetention = 1000

// WithLogger sends the backend's own log records (connection lost, consumer
// gaps, a lost stream) to l. Default: none.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
