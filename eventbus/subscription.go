package eventbus

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus/internal/deadline"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
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
	// What a delivery touches, first and together (128 bytes: two cache
	// lines): waiting (the parked reader's mark), filter (the types it
	// receives; nil for all, filter.go) and the publisher's half of q, the
	// publishers' side of the subscriber's queue with its live limits
	// (internal/queue); rd, below, is the consumer's. A delivery away from
	// every limit takes no lock: it fills q's lane
	// (queue.Queue.DeliverLockFree) and takes the mark by
	// compare-and-swap. mu guards ended, the rest of q (every other
	// writer, a delivery near a limit, the consumer's Drain), reason and
	// the parking fields; waiting is set under it. filter and sess are
	// fixed at Subscribe, before the subscription is visible.
	//
	// The size class of a Subscription (448 bytes) keeps it 64-byte
	// aligned, so the delivery lines are its first two; what the consumer
	// writes at a drain (q's second half, mu) and on every event (discard,
	// co, lead, rd, lastSeen) is off them. TestSubscriptionLayout checks
	// it.
	waiting atomic.Bool
	ended   bool
	filter  *typeFilter
	q       queue.Queue
	mu      sync.Mutex
	sess    *session

	// Written rarely (at the end, a park with a deadline); guarded by mu.
	reason    error
	waitUntil int64 // the parked reader's deadline (waits.Now clock), 0 none
	dlAt      int64 // the deadline of s's entry in the deadline queue, 0 none

	// Fixed at Subscribe (register sets id, pos and stopCtx under the bus
	// lock before the subscription is visible).
	id      uint64
	bus     *Bus
	kind    scope.Kind
	discard atomic.Bool // set once, when the end drops what is queued
	name    string
	pos     [2]int // index in the two registration lists (see index.go)
	stopCtx func() bool
	ctx     context.Context // the subscribe context
	co      *coalescing     // consumer-side merging; nil when off (coalesce.go)
	wake    chan struct{}   // the parked reader's wake-up (one token)

	// The consumer's side, touched only by the reading goroutine (lead and
	// rd's replay snapshot are set by Subscribe before the subscription is
	// visible): lead holds the frames before the replay (epoch_reset,
	// ring_evicted); rd is the consumer's side of the queue, whose counter
	// of what it took is written on every event and read by publishers
	// only near a limit.
	lead     []entry
	rd       queue.Reader
	lastSeen uint64

	// Written rarely; guarded by mu.
	dl   deadline.Slot // s's place in the bus's deadline queue (wait.go)
	done chan struct{} // made on the first Done call
	pump *pumpState    // the Events pump, nil until Events is called

	// Fixed at Subscribe: how s takes part in its session's presence
	// (presence.go); nil for an anonymous subscription that does not listen.
	member *presenceMember
}

// pumpState is the Events pump of a subscription (see Subscription.Events).
type pumpState struct {
	out     chan Event
	abandon chan struct{} // closed by Close and cancellation; stops the pump
}

// ID returns the subscriber's id, unique within the bus.
func (s *Subscription) ID() uint64 { return s.id }

// Err returns nil while the subscription is live, then why it ended:
// ErrSessionClosed, ErrEvicted, ErrClosed, ErrUnsubscribed, the context's
// error, or [ErrBackend] wrapping a backend failure. It does not block.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Done returns a channel closed when the subscription has ended (frames may
// still be queued for Next). Every call returns the same channel.
func (s *Subscription) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.ended {
			close(s.done)
		}
	}
	return s.done
}

// Close ends the subscription at once and discards what is queued; Err
// reports ErrUnsubscribed unless it had already ended. Idempotent; safe from
// any goroutine. [Subscription.Unsubscribe] lets the reader drain first.
func (s *Subscription) Close() { s.bus.cancel(s, ErrUnsubscribed, true) }

// Unsubscribe ends the subscription at once but lets the reader take what
// was already queued, then ErrUnsubscribed. An ended subscription keeps its
// reason. Idempotent; safe from any goroutine.
func (s *Subscription) Unsubscribe() { s.bus.cancel(s, ErrUnsubscribed, false) }

// Next returns the next frame in delivery order, blocking until one is
// queued, the subscription ends or ctx is done. With
// [SubscribeOptions.Coalesce] a frame may hold several merged events. Once
// the subscription ended and its queue is read, Next returns the reason (see
// [Subscription.Err]); when ctx is done first it returns ctx.Err() and the
// subscription stays usable. Not safe for concurrent use with itself or
// Events.
func (s *Subscription) Next(ctx context.Context) (ev Event, err error) {
	if s.co == nil {
		// What is ready is built straight into the result, with no layer
		// between (each would copy the 128-byte Event once more): a
		// record of the replay as replayInto builds it, then the drained
		// batch. The rest (leading frames, the guard, the end) is
		// reinsert's, through next.
		if s.rd.Replaying() && len(s.lead) == 0 && !s.discard.Load() {
			if r := s.rd.NextReplay(); r.ID > s.lastSeen {
				s.lastSeen = r.ID
				fillHead(&ev, r)
				fillTail(&ev, r.Ext, true)
				return ev, nil
			}
			s.bus.idx.cnt.guarded.Add(1)
		}
		if s.reinsert(&ev) {
			return ev, nil
		}
	}
	return s.next(ctx, nil)
}

// next is Next that also gives up when abandon is closed (the pump's exit).
func (s *Subscription) next(ctx context.Context, abandon <-chan struct{}) (Event, error) {
	return s.nextBefore(ctx, abandon, 0)
}

// nextBefore is the one blocking read behind Next, NextBefore and the
// Events pump: it also returns ErrTimeout once the deadline dl (on the
// bus's deadline queue clock, Bus.waits.Now; 0 none) has passed with
// nothing to hand out.
func (s *Subscription) nextBefore(ctx context.Context, abandon <-chan struct{}, dl int64) (ev Event, err error) {
	if s.co != nil {
		return s.nextMergedBefore(ctx, abandon, dl)
	}
	for {
		if s.reinsert(&ev) {
			return ev, nil
		}
		s.mu.Lock()
		if s.q.Pending() && !s.discard.Load() {
			s.drain()
			s.mu.Unlock()
			continue
		}
		if s.ended {
			err := s.reason
			s.mu.Unlock()
			return Event{}, err
		}
		parked := s.parkLocked(dl)
		s.mu.Unlock()
		if !parked {
			return Event{}, ErrTimeout
		}
		if abandon == nil {
			if done := ctx.Done(); done == nil || done == s.ctx.Done() {
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
			s.waiting.Store(false)
			err := s.reason
			s.mu.Unlock()
			return Event{}, err
		case <-ctx.Done():
			s.stopWaiting()
			return Event{}, ctx.Err()
		}
	}
}

// TryNext returns the next frame if one is ready, without blocking; ok is
// false otherwise (Err tells an ended subscription).
func (s *Subscription) TryNext() (ev Event, ok bool) {
	if s.co != nil {
		return s.tryNextMerged()
	}
	for {
		if s.reinsert(&ev) {
			return ev, true
		}
		s.mu.Lock()
		if !s.q.Pending() {
			s.mu.Unlock()
			return Event{}, false
		}
		s.drain()
		s.mu.Unlock()
	}
}

// mergeDrops folds the events_dropped runs that a publisher queued
// after the consumer took its batch, and that come right after d (nothing
// with an id between), into d: consecutive drops make one frame, not one
// per batch the consumer happened to take. It takes s.mu.
func (s *Subscription) mergeDrops(d *queue.Drop) {
	s.mu.Lock()
	s.q.MergeDrops(d)
	s.mu.Unlock()
}

// Events returns a channel of the frames Next would return, closed when the
// subscription has ended and its queue is read (Err says why). The first call
// starts a goroutine that exits when the channel closes, or one second after
// Bus.Close if nobody reads. Do not mix with Next or All.
func (s *Subscription) Events() <-chan Event {
	s.mu.Lock()
	p := s.pump
	start := p == nil
	if start {
		p = &pumpState{out: make(chan Event), abandon: make(chan struct{})}
		if s.discard.Load() {
			close(p.abandon)
		}
		s.pump = p
	}
	s.mu.Unlock()
	if start {
		go s.runPump(p)
	}
	return p.out
}

// pumpGrace is how long, after [Bus.Close], an Events pump waits for its
// reader to take one frame before it closes the channel.
const pumpGrace = time.Second

// handOver sends ev to the Events channel after the bus closed, waiting at
// most pumpGrace; it reports whether the reader took it.
func (s *Subscription) handOver(p *pumpState, ev Event) bool {
	t := time.NewTimer(pumpGrace)
	defer t.Stop()
	select {
	case p.out <- ev:
		return true
	case <-p.abandon:
	case <-s.ctx.Done():
	case <-t.C:
	}
	return false
}

// All returns an iterator of [Subscription.Next] with ctx: it yields
// (frame, nil) in delivery order, then (Event{}, err) once when Next fails,
// and stops. Breaking out leaves the subscription open. Do not mix with
// Events.
func (s *Subscription) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (s *Subscription) runPump(p *pumpState) {
	defer close(p.out)
	for {
		ev, err := s.next(context.Background(), p.abandon)
		if err != nil {
			return
		}
		select {
		case p.out <- ev:
		case <-p.abandon:
			return
		case <-s.ctx.Done():
			// The context watch is released when the subscription ends
			// (eviction, CloseSession, Bus.Close) while frames may still
			// be queued; a consumer that stopped reading and cancelled
			// its context must not leave the pump blocked here. The end
			// is recorded before the channel closes, so that Err says why
			// (the context watch may not have run yet).
			s.bus.cancel(s, context.Cause(s.ctx), true)
			return
		case <-s.bus.ttl.stop:
			// The bus is closed: hand over what is left to a reader that
			// is still reading, but wait for it at most pumpGrace per
			// frame, so that a channel nobody reads does not keep this
			// goroutine alive after Close.
			if !s.handOver(p, ev) {
				return
			}
		}
	}
}
