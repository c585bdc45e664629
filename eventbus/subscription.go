package eventbus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/replaybus/replaybus/scope"
)

// Subscription is one subscriber's view of the bus: history first, then live
// events, with synthetic frames where the delivery protocol needs them.
//
// Read it with [Subscription.Next] (no goroutine) or [Subscription.Events]
// (a channel fed by one goroutine); use one or the other, from one goroutine
// at a time. A Subscription ends when its context is cancelled, on
// [Subscription.Close], when it is evicted, when its session is closed and
// when the bus is closed; [Subscription.Err] then says why. Ending releases
// its registration and its slot under the subscriber cap at once.
type Subscription struct {
	id      uint64
	bus     *Bus
	sess    *session // the session subscribed to
	kind    scope.Kind
	name    string
	pos     [2]int // index in the two registration lists (see index.go)
	stopCtx func() bool
	ctx     context.Context // the subscribe context
	ctxDone <-chan struct{} // ctx.Done(): also stops the pump

	// limits, fixed at subscribe
	maxQueued int
	maxBytes  int64
	policy    OverflowPolicy
	warnOn    bool

	// consumed counts what the consumer has taken out of the live limits;
	// written by the consumer, read by publishers.
	consumed      atomic.Int64
	consumedBytes atomic.Int64

	mu       sync.Mutex
	q        []entry // shared queue, q[qh:] pending
	qh       int
	enq      int64 // live frames ever queued (minus those dropped while queued)
	enqBytes int64
	waiting  bool
	wake     chan struct{}
	ended    bool
	reason   error
	warned   bool
	done     chan struct{}

	// consumer side, touched only by the reading goroutine (lead and pre
	// are set by Subscribe before the subscription is visible)
	lead     []entry   // frames before the replay (epoch_reset, ring_evicted)
	pre      []*record // the replay snapshot, oldest first
	local    []entry
	li       int
	lastSeen uint64
	out      chan Event
	outOnce  sync.Once
	abandon  chan struct{} // closed by Close and cancellation; stops the pump
	discard  atomic.Bool   // set when the end drops what is queued
	co       *coalescing   // consumer-side merging; nil when off (coalesce.go)
}

// ID returns the subscriber's id, unique within the bus.
func (s *Subscription) ID() uint64 { return s.id }

// Session returns the id of the session subscribed to.
func (s *Subscription) Session() string { return s.sess.id }

// Scope returns the subscription's scope.
func (s *Subscription) Scope() scope.Kind { return s.kind }

// Err returns nil while the subscription is live, and afterwards why it
// ended: ErrSessionClosed, ErrEvicted, ErrClosed, ErrUnsubscribed or the
// context's error. It does not block.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Done returns a channel that is closed when the subscription has ended (it
// may still hold frames to read with Next).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close ends the subscription at once (AgentPool's unsubscribe), discarding
// what is still queued, and releases its slot. Err then reports
// ErrUnsubscribed — unless the subscription had already ended (evicted,
// session closed, bus closed, context done), whose reason stays; its queued
// frames are discarded all the same (a coalescing consumer still gets the
// merged event it was holding in its Throttle window). It is idempotent and safe to call from
// any goroutine.
func (s *Subscription) Close() { s.bus.cancel(s, ErrUnsubscribed) }

// Next returns the next frame, blocking until one is queued, the
// subscription ends, or ctx is done. Frames come in delivery order: resync
// frame (if any), replayed events, replay_complete (with a cursor, or after
// a replay cut short by the budget), then live events and the synthetic
// frames among them.
//
// With [SubscribeOptions.Coalesce] each call takes everything queued and a
// frame may hold several merged events ([Event.Count]); with a Throttle a
// mergeable event may be held for up to the window, and when ctx (or the
// subscription) ends while one is held, that one is returned first.
//
// After the subscription ended and every frame queued before the end has
// been returned, Next returns the reason (see [Subscription.Err]); when ctx
// is done first it returns ctx.Err() and the subscription stays usable.
// Next must not be called concurrently with itself or with Events.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	return s.next(ctx, nil)
}

// next is Next that also gives up when abandon is closed (the pump's exit).
func (s *Subscription) next(ctx context.Context, abandon <-chan struct{}) (Event, error) {
	if s.co != nil {
		return s.nextMerged(ctx, abandon)
	}
	for {
		if ev, ok := s.take(); ok {
			return ev, nil
		}
		s.mu.Lock()
		if s.qh < len(s.q) && !s.discard.Load() {
			s.swapLocked()
			s.mu.Unlock()
			continue
		}
		if s.ended {
			err := s.reason
			s.mu.Unlock()
			return Event{}, err
		}
		s.waiting = true
		s.mu.Unlock()
		if abandon == nil {
			if done := ctx.Done(); done == nil || done == s.ctxDone {
				// The subscription's own context (or none): its end wakes
				// us through s.wake, so a plain receive does, cheaper
				// than a select.
				<-s.wake
				continue
			}
		}
		select {
		case <-s.wake:
		case <-abandon:
			s.mu.Lock()
			s.waiting = false
			err := s.reason
			s.mu.Unlock()
			return Event{}, err
		case <-ctx.Done():
			s.mu.Lock()
			s.waiting = false
			s.mu.Unlock()
			return Event{}, ctx.Err()
		}
	}
}

// TryNext returns the next frame if one is queued, without blocking; ok is
// false when none is (check Err to tell an ended subscription). A coalescing
// subscription merges what is queued as Next does; a merged event still in
// its Throttle window is not due yet (ok false) unless the subscription
// has ended.
func (s *Subscription) TryNext() (ev Event, ok bool) {
	if s.co != nil {
		return s.tryNextMerged()
	}
	for {
		if ev, ok := s.take(); ok {
			return ev, true
		}
		s.mu.Lock()
		if s.qh == len(s.q) {
			s.mu.Unlock()
			return Event{}, false
		}
		s.swapLocked()
		s.mu.Unlock()
	}
}

// take returns the next frame of the consumer's local batch.
func (s *Subscription) take() (Event, bool) {
	if s.discard.Load() {
		clear(s.local)
		s.local, s.li, s.lead, s.pre = nil, 0, nil, nil
		return Event{}, false
	}
	if len(s.lead) > 0 {
		ev := s.lead[0].event()
		s.lead = s.lead[1:]
		return ev, true
	}
	for len(s.pre) > 0 {
		r := s.pre[0]
		s.pre[0] = nil // let the data go once read
		s.pre = s.pre[1:]
		if r.id <= s.lastSeen {
			s.bus.guarded.Add(1)
			continue
		}
		s.lastSeen = r.id
		return r.event(true), true
	}
	for s.li < len(s.local) {
		e := &s.local[s.li]
		s.li++
		if e.counts() {
			s.consumed.Add(1)
			s.consumedBytes.Add(e.cost())
		}
		if id := e.rec.id; id != 0 {
			if id <= s.lastSeen {
				// The guard of AgentPool's reinsert step: never hand out an
				// id twice or out of order. Counted; tests require zero.
				s.bus.guarded.Add(1)
				*e = entry{}
				continue
			}
			s.lastSeen = id
		}
		if e.kind == entryDropped && s.li == len(s.local) {
			s.mergeDrops(e.drop)
		}
		if e.kind == entryDropped || e.kind == entryGap {
			// The gap follows what this consumer really received; the
			// publisher no longer touches an entry it has handed over.
			e.drop.lastDelivered = s.lastSeen
		}
		ev := e.event()
		*e = entry{} // let the data go
		return ev, true
	}
	return Event{}, false
}

// mergeDrops folds the events_dropped runs that a publisher queued
// after the consumer took its batch, and that come right after d (nothing
// with an id between), into d: consecutive drops make one frame, not one
// per batch the consumer happened to take. It takes s.mu.
func (s *Subscription) mergeDrops(d *dropInfo) {
	s.mu.Lock()
	for s.qh < len(s.q) && s.q[s.qh].kind == entryDropped {
		next := s.q[s.qh].drop
		d.last = next.last
		d.count += next.count
		s.q[s.qh] = entry{}
		s.qh++
	}
	s.mu.Unlock()
}

// swapLocked hands the whole pending queue to the consumer in one step and
// gives the publisher the consumer's spent buffer back (zero allocation in
// steady state). s.mu must be held.
func (s *Subscription) swapLocked() {
	spent := s.local[:0]
	s.local, s.li = s.q[s.qh:], 0
	if cap(spent) > 4*cap(s.local)+64 {
		spent = nil // do not keep a burst-sized buffer forever
	}
	s.q, s.qh = spent, 0
}

// Events returns a channel that yields the same frames as Next and is closed
// when the subscription has ended and everything queued was read; then Err
// says why. The first call starts one goroutine that feeds the channel; it
// exits when the channel is closed, or at once when the subscription is
// closed or its context cancelled, so a caller that stops reading must Close
// the subscription or cancel its context. Do not mix with Next.
func (s *Subscription) Events() <-chan Event {
	s.outOnce.Do(func() {
		s.out = make(chan Event)
		s.mu.Lock()
		if s.abandon == nil {
			s.abandon = make(chan struct{})
			if s.discard.Load() {
				close(s.abandon)
			}
		}
		abandon := s.abandon
		s.mu.Unlock()
		go s.pump(abandon)
	})
	return s.out
}

func (s *Subscription) pump(abandon <-chan struct{}) {
	defer close(s.out)
	for {
		ev, err := s.next(context.Background(), abandon)
		if err != nil {
			return
		}
		select {
		case s.out <- ev:
		case <-abandon:
			return
		case <-s.ctxDone:
			// The context watch is released when the subscription ends
			// (eviction, CloseSession, Bus.Close) while frames may still
			// be queued; a consumer that stopped reading and cancelled
			// its context must not leave the pump blocked here. The end
			// is recorded before the channel closes, so that Err says why
			// (the context watch may not have run yet).
			s.bus.cancel(s, context.Cause(s.ctx))
			return
		}
	}
}
