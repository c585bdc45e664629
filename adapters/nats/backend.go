package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
)

// Errors of the backend. Subscriptions that a backend failure ends report
// them wrapped in [eventbus.ErrBackend].
var (
	// ErrDisconnected ends the node's subscriptions when its NATS
	// connection drops; clients resume (on this node once it reconnects, or
	// on another).
	ErrDisconnected = errors.New("nats: connection to NATS lost")
	// ErrStreamLost: the stream was deleted or re-created (it has another
	// identity than when the node started). The node's history no longer
	// matches the stream: its subscriptions end, its publishes fail, and a
	// new node must be started, which gets a new epoch.
	ErrStreamLost = errors.New("nats: stream deleted or re-created")
)

// Backend is the [backend.Backend] over one JetStream stream. Make one with
// [NewBackend] and hand it to [eventbus.NewWithBackend], or let [New] do
// both. All methods are safe for concurrent use.
type Backend struct {
	o       options
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	stream  jetstream.Stream
	acks    *acker // publishes and their acks
	limit   int    // the bus's replay buffer size
	perSubj int64  // the stream's MaxMsgsPerSubject: limit × retention
	created time.Time
	epoch   string
	log     *slog.Logger

	lost atomic.Pointer[error] // set once the stream is gone for this node

	leases *leases // the node's leases (lease.go)

	feedMu    sync.Mutex // serialises every call into feed
	feed      backend.Feed
	outage    bool          // Fail was sent for the current disconnection; under feedMu
	processed atomic.Uint64 // highest stream sequence the consumer handled

	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	startMu  sync.Mutex
	started  bool
	closed   bool
	consName string // prefix of the consumer names, unique per node
	serial   int    // consumers made so far; touched by the consumer goroutine only
	status   chan nats.Status
	adv      *nats.Subscription
	advSig   chan struct{} // the stream-deleted advisory arrived
	leader   *leaderSignal // the stream's leader elections (leader.go)
	leadSub  *nats.Subscription
	verify   atomic.Bool   // the connection came back: check the stream before ingesting
	kick     chan struct{} // the connection came back: re-create the consumer now
	wg       sync.WaitGroup

	// Caches of the consumer goroutine (touched by it only): the tree
	// path of each subject and the interned event types, so that ingest
	// does not allocate them per event. Bounded: reset when full.
	paths map[string][]string
	types map[string]string
}

// maxCached bounds each ingest cache.
const maxCached = 4096

var _ backend.Backend = (*Backend)(nil)
var _ backend.Syncer = (*Backend)(nil)
var _ backend.AsyncBackend = (*Backend)(nil)
var _ backend.LeaseBackend = (*Backend)(nil)

// New returns a bus node over NATS JetStream on connection nc: it creates
// the stream (or updates it to the options), derives the epoch from the
// stream's identity, starts the node's consumer and returns the
// [eventbus.Bus] it feeds (see the package documentation). cfg is the bus
// configuration; ReplayBufferSize × the retention ([WithRetention]) is the
// stream's MaxMsgsPerSubject and the retention × ReplayMaxAge its MaxAge
// (unless [WithMaxAge] sets it); the
// stream keeps raw events whatever ReplayCompact is, and has no per-session
// byte bound (JetStream's MaxBytes is stream-wide: it would evict one
// session's events for another's), so ReplayMaxBytes binds each node's
// replay buffers only. Every node of one bus must use the same
// ones: the last node to start updates the stream to its values.
//
// The caller keeps nc: [eventbus.Bus.Close] stops the node but does not
// close nc. ctx bounds the start only. Errors: cfg's validation errors, an
// option naming its bad value, and NATS errors (no JetStream, a stream
// that cannot be created or updated, …) wrapped with what was being done.
func New(ctx context.Context, nc *nats.Conn, cfg eventbus.Options, opts ...Option) (*eventbus.Bus, error) {
	be, err := NewBackend(ctx, nc, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return be.bus(ctx, cfg)
}

// Connect is [New] on a connection it dials to url (a comma-separated list
// of nats:// URLs for a cluster), retrying forever while the node runs; the
// bus owns that connection and closes it with [eventbus.Bus.Close].
func Connect(ctx context.Context, url string, cfg eventbus.Options, opts ...Option) (*eventbus.Bus, error) {
	o := defaultOptions()
	for _, fn := range opts {
		fn(&o)
	}
	log := o.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(url, nats.Name("replaybus"), nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("replaybus/nats: connection", slog.Any("err", err))
		}))
	if err != nil {
		return nil, fmt.Errorf("nats: connecting to %s: %w", url, err)
	}
	be, err := NewBackend(ctx, nc, cfg, opts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	be.ownConn = true
	return be.bus(ctx, cfg)
}

func (be *Backend) bus(ctx context.Context, cfg eventbus.Options) (*eventbus.Bus, error) {
	b, err := eventbus.NewWithBackend(ctx, cfg, be)
	if err != nil {
		_ = be.Close()
		return nil, err
	}
	return b, nil
}

// NewBackend prepares the backend of one bus node: it validates cfg and
// the options, creates or updates the stream and reads its identity (the
// epoch), and creates or updates the lease bucket <stream>_LEASES (see
// the package doc, "Turns and presence"; on a NATS server before 2.11,
// which has no per-message TTL, the node logs a warning and runs without
// leases: a dead node's turns are not ended for it, presence is per
// node). The consumer starts when [eventbus.NewWithBackend] calls Start.
// Use it instead of [New] to keep a handle on the backend ([Backend.Sync]).
func NewBackend(ctx context.Context, nc *nats.Conn, cfg eventbus.Options, opts ...Option) (*Backend, error) {
	if nc == nil {
		return nil, errors.New("nats: nil connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	be := &Backend{o: defaultOptions(), nc: nc, limit: cfg.ReplayBufferSize}
	for _, o := range opts {
		o(&be.o)
	}
	if err := be.o.validate(); err != nil {
		return nil, err
	}
	be.log = be.o.logger
	if be.log == nil {
		be.log = slog.New(slog.DiscardHandler)
	}
	if !be.o.maxAgeSet && cfg.ReplayMaxAge > 0 {
		// The stream follows the replay window's age bound as its count
		// follows the buffer size: retention windows.
		be.o.maxAge = cfg.ReplayMaxAge * time.Duration(be.o.retention)
	}
	be.perSubj = int64(be.limit) * int64(be.o.retention)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: JetStream context: %w", err)
	}
	be.js = js
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              be.o.stream,
		Description:       "replaybus events: one subject per session, named by its place in the session tree",
		Subjects:          []string{be.o.prefix + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: be.perSubj,
		MaxAge:            be.o.maxAge,
		Storage:           be.o.storage,
		Replicas:          be.o.replicas,
		// Idempotent producers' batches (producer.go); a server before
		// 2.12 ignores it, and the node then refuses stamped publishes.
		AllowAtomicPublish: true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: creating or updating stream %q (subjects %s.>, %d replicas, %v storage, %d events per subject): %w",
			be.o.stream, be.o.prefix, be.o.replicas, be.o.storage, be.perSubj, err)
	}
	be.stream = st
	if be.leases, err = newLeases(ctx, be, cfg.TurnLease); err != nil {
		return nil, err
	}
	if be.acks, err = newAcker(nc, be.o.stream, be.o.publishTimeout, be.loseStream); err != nil {
		return nil, err
	}
	be.leader = newLeaderSignal()
	be.subscribeLeader()
	be.created = st.CachedInfo().Created
	be.epoch = epochOf(be.o.stream, be.created)
	be.ctx, be.cancel = context.WithCancel(context.Background())
	return be, nil
}

// epochOf derives the epoch from the stream's identity: the same on every
// node and across restarts, new when the stream is re-created.
func epochOf(stream string, created time.Time) string {
	h := sha256.Sum256([]byte(stream + "\x00" + created.UTC().Format(time.RFC3339Nano)))
	return hex.EncodeToString(h[:8])
}

// Epoch implements [backend.Backend]: 16 hex digits derived from the stream
// name and its creation time.
func (be *Backend) Epoch() string { return be.epoch }

// Stream returns the name of the stream the backend uses.
func (be *Backend) Stream() string { return be.o.stream }

// MaxSubjectLen bounds a session's subject (its escaped tree path), in
// bytes. NATS closes a client connection for good when a control line
// exceeds the server's max_control_line (4 KiB by default), so a deep tree
// of long ids is refused by Append (ErrInvalid) before it reaches the
// server.
const MaxSubjectLen = 3 << 10

// maxAsyncPending bounds the pipelined publishes in flight over one
// connection (all pipelines of the node together); each pipeline bounds its
// own window below it.
const maxAsyncPending = 1 << 16

// ready confirms the stream when a reconnect left it unconfirmed, bounded
// by ctx and the publish timeout; it returns why the node may not publish.
func (be *Backend) ready(ctx context.Context) error {
	if !be.verify.Load() {
		if p := be.lost.Load(); p != nil {
			return *p
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, be.o.publishTimeout)
	defer cancel()
	if be.confirmStream(ctx) {
		return nil
	}
	if p := be.lost.Load(); p != nil {
		return *p
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: stream %q unconfirmed after a reconnect: %w", be.o.stream, err)
	}
	return fmt.Errorf("nats: stream %q: %w", be.o.stream, eventbus.ErrClosed)
}

// Append implements [backend.Backend]: a JetStream publish of ev to the
// subject of path, waiting for the ack (bounded by ctx and the publish
// timeout); the id is the stream sequence. A publish no stream received
// (an election) is sent again once a leader is elected. The payload is
// stored as given, neither re-encoded nor re-validated (see envelope.go).
// It never waits on a subscriber. Errors, wrapped, never panicked: a
// closed connection, a payload over the server's limit, an over-long
// subject ([eventbus.ErrInvalid]), [ErrNoAck] (may be stored),
// [ErrNoStream], [ErrStreamLost].
func (be *Backend) Append(ctx context.Context, path []string, ev backend.Record) (uint64, error) {
	// No stream received it (no responders: the stream has no leader, an
	// election is under way), so it is certainly not stored, and the
	// caller waits for this one event: it is sent again after the
	// election, within the publish timeout (leader.go). A publish that
	// went unanswered is not: it may be stored.
	rctx, cancel := context.WithTimeout(ctx, be.o.publishTimeout)
	defer cancel()
	for {
		p, err := be.send(ctx, path, ev)
		if err != nil {
			return 0, err
		}
		seq, err := p.Wait(rctx)
		if err != nil && rctx.Err() != nil {
			p.a.forget(p.token)   // nobody waits for it any more
			if ctx.Err() == nil { // the publish timeout, over the tries
				return 0, fmt.Errorf("%w: %q after %v", ErrNoAck, p.subject, be.o.publishTimeout)
			}
			return 0, fmt.Errorf("nats: publishing to %q: %w (the event may or may not be stored)", p.subject, err)
		}
		if errors.Is(err, ErrNoStream) && be.pauseForLeader(rctx) {
			continue
		}
		return seq, err
	}
}

// AppendAsync implements [backend.AsyncBackend]: it sends ev as Append
// does without waiting for the ack, and returns the handle whose Wait
// yields the stream sequence, or [ErrNoAck] once the publish timeout has
// passed. Messages on one connection reach the stream in the order sent,
// and none is retried (a retry would land after later events), so one
// pipeline's events are stored in order or not at all. Errors returned at
// once mean the event was not sent: as for Append, and more than 65,536
// publishes of this node awaiting their ack.
func (be *Backend) AppendAsync(path []string, ev backend.Record) (backend.PendingAppend, error) {
	p, err := be.send(context.Background(), path, ev)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// send checks the node may publish, and sends ev.
func (be *Backend) send(ctx context.Context, path []string, ev backend.Record) (*pendingAck, error) {
	if err := be.ready(ctx); err != nil {
		return nil, err
	}
	subject := subjectFor(be.o.prefix, path)
	if len(subject) > MaxSubjectLen {
		return nil, fmt.Errorf("nats: session path %q gives a subject of %d bytes, over %d: %w",
			path, len(subject), MaxSubjectLen, eventbus.ErrInvalid)
	}
	return be.acks.send(subject, &ev)
}

// Ready reports whether the node can serve publishes and subscribes: nil
// while its NATS connection is up and its stream is the one it started on;
// else an error wrapping [ErrDisconnected] (the connection is down: nats.go
// reconnects by itself, and after it the node re-creates its consumer),
// [ErrStreamLost] (start a new node) or [eventbus.ErrClosed] after Close. It
// asks nothing of the server, so it is cheap enough for every request (a
// readiness probe, or a 503 before a publish that would otherwise wait out
// the publish timeout), and safe for concurrent use.
func (be *Backend) Ready() error {
	if p := be.lost.Load(); p != nil {
		return *p
	}
	if be.ctx.Err() != nil {
		return fmt.Errorf("nats: node closed: %w", eventbus.ErrClosed)
	}
	if st := be.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w (now %s; the node reconnects by itself)", ErrDisconnected, strings.ToLower(st.String()))
	}
	return nil
}

// Close implements [backend.Backend]: it stops the consumer and its
// goroutines, deletes the consumer, and closes the connection when
// [Connect] made it. Idempotent.
func (be *Backend) Close() error {
	be.startMu.Lock()
	if be.closed {
		be.startMu.Unlock()
		return nil
	}
	be.closed = true
	started := be.started
	be.startMu.Unlock()
	if started && be.leases != nil {
		be.leases.close() // while the connection is up: the node's leases go at once
	}
	be.startMu.Lock()
	be.cancel()
	if be.status != nil {
		be.nc.RemoveStatusListener(be.status)
	}
	if be.adv != nil {
		_ = be.adv.Unsubscribe()
	}
	if be.leadSub != nil {
		_ = be.leadSub.Unsubscribe()
	}
	be.startMu.Unlock()
	be.wg.Wait()
	be.acks.close()
	if be.ownConn {
		be.nc.Close()
	}
	return nil
}

// fail ends the node's subscriptions once per outage.
func (be *Backend) fail(err error) {
	be.feedMu.Lock()
	defer be.feedMu.Unlock()
	if be.outage || be.feed == nil {
		return
	}
	be.outage = true
	be.log.Warn("replaybus/nats: ending subscriptions", slog.String("stream", be.o.stream), slog.Any("err", err))
	be.feed.Fail(err)
}

// loseStream marks the stream gone for this node: publishes fail, the
// subscriptions end, the consumer stops.
func (be *Backend) loseStream(why error) {
	err := fmt.Errorf("%w: %q: %w", ErrStreamLost, be.o.stream, why)
	if !be.lost.CompareAndSwap(nil, &err) {
		return
	}
	be.log.Error("replaybus/nats: stream lost", slog.String("stream", be.o.stream), slog.Any("err", why))
	be.feedMu.Lock()
	be.outage = false // this Fail goes out even during an outage
	be.feedMu.Unlock()
	be.fail(err)
}

// watch turns connection status changes into feed failures and stream
// checks, and checks the stream when its deletion is announced.
func (be *Backend) watch(ch chan nats.Status) {
	defer be.wg.Done()
	for {
		select {
		case <-be.ctx.Done():
			return
		case <-be.advSig:
			be.verify.Store(true)
			be.confirmStream(be.ctx)
		case st, ok := <-ch:
			if !ok {
				return
			}
			switch st {
			case nats.DISCONNECTED, nats.RECONNECTING:
				be.fail(ErrDisconnected)
			case nats.CONNECTED:
				be.verify.Store(true)
				be.feedMu.Lock()
				be.outage = false
				be.feedMu.Unlock()
				be.confirmStream(be.ctx)
				// The server may have restarted and lost the node's
				// consumer (memory storage): re-create it now rather
				// than after two missed heartbeats.
				select {
				case be.kick <- struct{}{}:
				default:
				}
			case nats.CLOSED:
				be.fail(fmt.Errorf("%w: %w", ErrDisconnected, nats.ErrConnectionClosed))
				return
			}
		}
	}
}
