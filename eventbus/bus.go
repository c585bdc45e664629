package eventbus

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/deadline"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// Bus is a per-session event bus with a bounded replay buffer per session,
// the Go form of AgentPool's EventBus with qwen-code's resume and
// backpressure protocol. [New] makes one that keeps its ids and history in
// this process; [NewWithBackend] makes one over a shared backend
// (adapters/nats: NATS JetStream, several nodes), with the same API and
// delivery protocol. The zero value is not usable.
//
// All methods are safe for concurrent use. A publish takes the lock of its
// session's tree (a root and everything below it) for the id, the replay
// buffer append and the queueing for every matching subscriber, so
// publishes to distinct session trees run in parallel; while an "all"
// subscriber exists they meet for a moment in one bus-wide ordering step.
// CreateSession, CloseSession, expiry, an "all" Subscribe and Close change
// the structure and exclude every publisher for their (short) duration.
// None of them waits on a subscriber. docs/architecture.md has the locks.
type Bus struct {
	cfg       Options // defaults applied; OverflowPolicy the one in force
	policySet bool    // the OverflowPolicy given to New was set, not defaulted
	epoch     string
	droppable map[string]struct{}
	// mu is the structure lock (reader-biased): publishes and tree-scoped
	// subscribes and unsubscribes take its read side, then the tree lock
	// of their session's tree (session.tmu of the root); structural
	// changes, "all" subscribes, the backend paths and Close take it
	// exclusively and then need no other bus lock. What it guards when
	// held exclusively (and may be read under its read side): closed, the
	// memory store (mem: the tree's shape and every session's place in it,
	// the registry, tombstones, lost-id marks, kept buffers, stats) and
	// the remote side's feedWaiters. The lock order is in
	// publish.go, beside the code that takes the locks.
	mu     *xsync.RBMutex
	closed bool
	mem    memStore    // where ids' history lives in this process (store.go)
	w      writer      // where an event enters the history: memWriter or &remote (store.go)
	remote remoteStore // the backend, when the bus was made over one (remote.go)
	ttl    expiry      // the expiry goroutine's stop and done (expire.go)

	// hot is the line every publish writes: the sequence and the two
	// counters written right after it.
	hot   hotLine
	idx   index                          // the delivery index: who hears a publish (index.go)
	waits *deadline.Queue[*Subscription] // parked readers' deadlines (wait.go: NextBefore)
}

// hotLine holds what every publish writes. seq is the last id assigned (0
// before the first): the in-memory bus takes the next one with seq.Add(1)
// where the event is appended; a backend's feed sets it to the id it
// ingests. It has a cache line of its own, shared only with the two
// counters every publish also writes right after (Stats.Published,
// Stats.Delivered): they cost an atomic add on a line the publisher
// already holds, and the fields publishers only read (diag's count, …) do
// not move with them.
type hotLine struct {
	_         [64]byte
	seq       atomic.Uint64
	published atomic.Uint64 // events accepted (Stats.Published)
	delivered atomic.Uint64 // live events queued for subscribers (Stats.Delivered)
	_         [40]byte
}

// expiry is the expiry goroutine's lifeline: stop is closed by Close,
// done by the goroutine when it returns.
type expiry struct {
	stop, done chan struct{}
}

// New returns a running in-memory Bus configured by cfg (zero fields take
// their defaults, see [Options]). It validates everything up front and
// returns an error naming the bad field and value ([*OptionError], or
// ErrInvalid for a bad Epoch). The bus starts one goroutine that expires
// idle sessions; [Bus.Close] stops it. The backend package makes a bus
// over a shared backend (NATS JetStream) instead.
func New(cfg Options) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	b := &Bus{cfg: cfg, mu: xsync.NewRBMutex(), mem: memStore{tombs: make(map[string]int64), registry: newRegistry()}}
	b.policySet = cfg.OverflowPolicy != ""
	if !b.policySet {
		b.cfg.OverflowPolicy = defaultOverflowPolicy // in-process default
	}
	b.w = memWriter{}
	b.waits = deadline.New(b.deadlineDue)
	if b.cfg.now == nil {
		b.cfg.now = time.Now
	}
	b.epoch = b.cfg.Epoch
	if b.epoch == "" {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		b.epoch = hex.EncodeToString(raw[:])
	} else if err := checkEpoch(b.epoch); err != nil {
		return nil, err
	}
	b.idx.now, b.idx.report, b.idx.logger = b.cfg.now, b.cfg.Diagnostics, b.cfg.Logger
	for _, t := range cfg.DroppableTypes {
		if b.idx.droppable == nil {
			b.idx.droppable = make(map[string]struct{})
		}
		b.idx.droppable[t] = struct{}{}
	}
	b.ttl.stop, b.ttl.done = make(chan struct{}), make(chan struct{})
	go b.expireLoop()
	return b, nil
}

func checkEpoch(e string) error {
	if len(e) == 0 || len(e) > 64 {
		return invalidf("epoch %q must be 1-64 characters", e)
	}
	for _, c := range []byte(e) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return invalidf("epoch %q: character %q not in [A-Za-z0-9_]", e, c)
		}
	}
	return nil
}

// Epoch returns this bus incarnation's epoch: 16 random hex digits unless set
// with [Options.Epoch]. A client cursor from another epoch is an epoch_reset.
func (b *Bus) Epoch() string { return b.epoch }

// Options returns the options in force: those given to [New] with their
// defaults applied, OverflowPolicy still "" when it was not set (then
// in-process subscribers get drop_oldest and the streaming adapters give
// theirs drop_subscriber, the rule of [Options.OverflowPolicy]).
func (b *Bus) Options() Options {
	o := b.cfg
	if !b.policySet {
		o.OverflowPolicy = ""
	}
	return o
}

// LastEventID returns the highest id assigned so far (0 before the first
// publish), qwen-code's lastEventId getter. With publishers running in
// parallel on other session trees, the event with that id may still be on
// its way into its replay buffer and queues; every publish that returned
// before the call has an id at or below it.
//
// It takes no lock (an atomic load) and never waits for a publish.
func (b *Bus) LastEventID() uint64 { return b.hot.seq.Load() }

func (b *Bus) nowNanos() int64 { return b.cfg.now().UnixNano() }

// checkName refuses a bad session id or event type (frame.CheckName) with
// an ErrInvalid error: "eventbus: invalid argument: " and frame's text.
func checkName(what, v string) error {
	if err := frame.CheckName(what, v); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// Stats returns the current counters. It takes the structure lock's read
// side briefly, for the figures only structural changes move (Sessions,
// Expired, Retained, RetainedDropped) — it never waits for a publish; the
// others are read from counters that publishers and
// subscribers write without it, one by one: during concurrent publishing
// the figures are each exact at some instant, not all at the same one.
func (b *Bus) Stats() observe.Stats {
	tok := b.mu.RLock()
	st := b.mem.stats
	st.Retained = len(b.mem.keptByID)
	b.mu.RUnlock(tok)
	c := &b.idx.cnt
	st.Subscribers = int(c.nsubs.Load())
	st.Published = b.hot.published.Load()
	st.Delivered = b.hot.delivered.Load()
	st.Dropped = c.dropped.Load()
	st.Evicted = c.evicted.Load()
	st.Warnings = c.warnings.Load()
	st.Resyncs = c.resyncs.Load()
	st.Replayed = uint64(c.replayed.Load())
	st.Guarded = uint64(c.guarded.Load())
	return st
}

// Close ends the bus: every subscription ends with ErrClosed once it has
// drained what was queued, the expiry goroutine stops, and later calls
// return ErrClosed. It is idempotent and returns nil; it does not wait for
// consumers.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.ttl.done
		return nil
	}
	b.closed = true
	var subs []*Subscription
	b.idx.each(&b.mem.tree, func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		b.idx.unregister(s)
		s.end(ErrClosed, false)
	}
	close(b.ttl.stop)
	b.mu.Unlock()
	b.waits.Close()
	<-b.ttl.done
	return b.w.shutdown()
}

// cancel ends s at once (Close, Unsubscribe, context cancellation), with
// discard dropping what is still queued (all but Unsubscribe). It takes the structure lock's read side and the lock that
// guards s's lists — its session's tree lock, or index.all.mu for an "all"
// subscriber — so it waits for publishes of that tree (or the ordering
// step) only.
func (b *Bus) cancel(s *Subscription, reason error, discard bool) {
	tok := b.mu.RLock()
	if s.kind == scope.All {
		b.idx.all.mu.Lock()
		b.idx.unregister(s)
		b.idx.all.mu.Unlock()
	} else {
		tl := s.sess.treeLock()
		tl.Lock()
		b.idx.unregister(s)
		tl.Unlock()
	}
	b.mu.RUnlock(tok)
	s.end(reason, discard)
}

func (s *Subscription) end(reason error, discard bool) {
	s.mu.Lock()
	s.endLocked(reason, discard)
	s.mu.Unlock()
	s.stopWatch()
}

// stopWatch releases the context watch; safe to call more than once.
func (s *Subscription) stopWatch() {
	if s.stopCtx != nil {
		s.stopCtx()
	}
}
