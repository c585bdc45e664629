package eventbus

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/internal/deadline"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// Bus is a per-session event bus with a bounded replay buffer per session
// and a resume and backpressure protocol. [New] makes one that keeps its
// ids and history in
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
	// hist is the history in this process, with the structure lock and
	// the tree locks (package internal/store); st is where an event
	// enters it (store.go: memStore, or fedStore over a backend).
	hist  *history
	st    eventStore
	idx   index                          // the delivery index: who hears a publish (index.go)
	turns turnKeeper                     // the turns this bus runs, and its turn counters (turnstore.go)
	ttl   expiry                         // the expiry goroutine's stop and done
	waits *deadline.Queue[*Subscription] // parked readers' deadlines (wait.go: NextBefore, NextBatch)
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
// idle sessions; [Bus.Close] stops it. [NewWithBackend] makes a bus over a
// shared backend (NATS JetStream) instead.
func New(cfg Options) (*Bus, error) {
	b, _, err := newBus(cfg, nil)
	return b, err
}

// newBus is New, and with be set the bus of NewWithBackend, whose store it
// returns (the backend not started).
func newBus(cfg Options, be backend.Backend) (*Bus, *fedStore, error) {
	if be != nil {
		cfg.Epoch = be.Epoch()
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	cfg = cfg.WithDefaults()
	b := &Bus{cfg: cfg}
	b.policySet = cfg.OverflowPolicy != ""
	if !b.policySet {
		b.cfg.OverflowPolicy = defaultOverflowPolicy // in-process default
	}
	if b.cfg.now == nil {
		b.cfg.now = time.Now
	}
	b.epoch = b.cfg.Epoch
	if b.epoch == "" {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		b.epoch = hex.EncodeToString(raw[:])
	} else if err := checkEpoch(b.epoch); err != nil {
		return nil, nil, err
	}
	b.hist = store.NewHistory[subs](store.Config{Log: logOptions(cfg), TTL: int64(cfg.SessionTTL),
		ClosedRetention: int64(cfg.ClosedRetention), MaxRetained: cfg.MaxRetained})
	b.idx.now, b.idx.report, b.idx.logger = b.cfg.now, b.cfg.Diagnostics, b.cfg.Logger
	for _, t := range cfg.DroppableTypes {
		if b.idx.droppable == nil {
			b.idx.droppable = make(map[string]struct{})
		}
		b.idx.droppable[t] = struct{}{}
	}
	b.waits = deadline.New(b.deadlineDue)
	b.ttl.stop, b.ttl.done = make(chan struct{}), make(chan struct{})
	mem := &memStore{h: b.hist, idx: &b.idx, now: b.cfg.now, controller: cfg.SessionController, tk: &b.turns}
	var fed *fedStore
	b.st = mem
	if be != nil {
		fed = newFedStore(mem, be, b.ttl.stop)
		b.st = fed
	}
	b.initTurns(mem, fed)
	go b.expireLoop()
	return b, fed, nil
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

// Options returns the options in force: those given to [New] with defaults
// applied, and the unset OverflowPolicy read as drop_oldest
// ([Bus.OverflowPolicySet] tells the two apart).
func (b *Bus) Options() Options { return b.cfg }

// OverflowPolicySet reports whether the options given to [New] set the
// overflow policy; when not, the SSE and WebSocket handlers give their
// subscribers drop_subscriber ([Options.OverflowPolicy]).
func (b *Bus) OverflowPolicySet() bool { return b.policySet }

// LastEventID returns the highest id assigned so far, 0 before the first
// publish; every publish that returned before the call has an id at or
// below it. It takes no lock.
func (b *Bus) LastEventID() uint64 { return b.hist.LastID() }

func (b *Bus) nowNanos() int64 { return b.cfg.now().UnixNano() }

// Stats returns the current counters, each exact at some instant during the
// call. It never waits for a publish.
func (b *Bus) Stats() observe.Stats {
	var st observe.Stats
	tok := b.hist.RLock()
	b.hist.Stats(&st)
	b.hist.RUnlock(tok)
	c := &b.idx.cnt
	st.Subscribers = int(c.nsubs.Load())
	st.Dropped = c.dropped.Load()
	st.Evicted = c.evicted.Load()
	st.Warnings = c.warnings.Load()
	st.Resyncs = c.resyncs.Load()
	st.Replayed = uint64(c.replayed.Load())
	st.Guarded = uint64(c.guarded.Load())
	b.turns.stats(&st)
	st.PresenceChanges = b.idx.hub.changes.Load()
	return st
}

// Close ends the bus: every subscription ends with ErrClosed once it has
// drained what was queued, the expiry goroutine stops, and later calls
// return ErrClosed. It is idempotent and returns nil; it does not wait for
// consumers.
func (b *Bus) Close() error {
	b.turns.goodbye()
	b.hist.Lock()
	if b.hist.Closed() {
		b.hist.Unlock()
		<-b.ttl.done
		return nil
	}
	b.turns.endOwnTurnsLocked()
	b.idx.hub.stop()
	b.hist.Close()
	var subs []*Subscription
	b.idx.each(b.hist, func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		b.idx.unregister(s)
		s.end(ErrClosed, false)
	}
	close(b.ttl.stop)
	b.hist.Unlock()
	b.waits.Close()
	<-b.ttl.done
	b.turns.wait()
	return b.st.shutdown()
}

// cancel ends s at once (Close, Unsubscribe, context cancellation), with
// discard dropping what is still queued (all but Unsubscribe). It takes the structure lock's read side and the lock that
// guards s's lists — its session's tree lock, or index.all.mu for an "all"
// subscriber — so it waits for publishes of that tree (or the ordering
// step) only.
func (b *Bus) cancel(s *Subscription, reason error, discard bool) {
	tok := b.hist.RLock()
	if s.kind == scope.All {
		b.idx.all.mu.Lock()
		b.idx.unregister(s)
		b.idx.all.mu.Unlock()
	} else {
		tl := s.sess.TreeLock()
		tl.Lock()
		b.idx.unregister(s)
		tl.Unlock()
	}
	b.hist.RUnlock(tok)
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
