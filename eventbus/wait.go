package eventbus

import (
	"context"
	"errors"
	"math"
	"time"
)

// ErrTimeout is returned by [Subscription.NextBefore] when no frame was
// ready before its deadline. The subscription is still live: call
// NextBefore (or Next) again. It is not context.DeadlineExceeded, so that a
// subscription whose own context had a deadline (it then ends with
// context.DeadlineExceeded) is never mistaken for a quiet one.
var ErrTimeout = errors.New("eventbus: no frame before the deadline")

// NextBefore returns the next frame as [Subscription.Next] does, blocking
// until one is queued, the subscription ends (its context is done, Close,
// eviction, CloseSession, Bus.Close — then it returns the reason, as Err
// does, once every frame queued before the end has been returned) or
// deadline passes (then it returns ErrTimeout and the subscription stays
// usable). A zero deadline waits without one, as does one after the year
// 2262 (the last instant Unix nanoseconds in an int64 hold); a deadline
// already past still returns a frame that is ready.
//
// It is the wait a stream writer with heartbeats needs (adapters/sse writes
// a heartbeat comment after each ErrTimeout), without a deadline context:
// Next with a context.WithDeadline child costs that context (≈ 270 bytes
// while it lives, an allocation per renewal) and a select on every park.
// NextBefore parks on the subscription alone; the deadline is kept in the
// bus's one queue of deadlines, served by one runtime timer, which the subscription
// enters only when its reader parks with an earlier deadline than the one
// already queued for it — so a busy stream whose deadline moves on with
// every write touches the queue about once per deadline interval, and an
// idle one costs a queue slot (16 bytes), not a timer. A deadline may be
// noticed up to the runtime timer's latency late, never early. Early and
// late are as time.Time measures them: by the deadline's monotonic clock
// reading when it has one (time.Now().Add(d) does), otherwise by the wall
// clock at the call (as context.WithDeadline); a wall clock step after the
// call moves no deadline.
//
// A coalescing subscription ([SubscribeOptions.Coalesce]) merges as Next
// does; a group held in its Throttle window stays held across an
// ErrTimeout. NextBefore must not be called concurrently with itself, Next,
// TryNext, Events or All.
func (s *Subscription) NextBefore(deadline time.Time) (ev Event, err error) {
	dl := s.deadlineOf(deadline) // on the deadline queue's clock (monotonic), 0 none
	// No caller context: the plain-receive path of nextBefore, woken by
	// publishers, the deadline queue and the end of the subscription (its
	// context's watch included).
	return s.nextBefore(context.Background(), nil, dl)
}

// lastDeadline is the last instant Unix nanoseconds in an int64 hold; a
// later deadline is none (NextBefore).
var lastDeadline = time.Unix(0, math.MaxInt64)

// parkLocked marks the reader parked until deadline dl (on the deadline
// queue's clock, 0 none) and enters s into the deadline queue with dl when
// it has no entry there, or one later than dl; it returns false, parking nothing, when dl has
// already passed (the reader then returns ErrTimeout). s.mu must be held:
// the entry is made in the same critical section that checked s has not
// ended, so that the end (which removes the entry under s.mu) cannot fall
// between them and leave an ended subscription queued until its deadline.
func (s *Subscription) parkLocked(dl int64) bool {
	if dl != 0 && s.bus.waits.Now() >= dl {
		return false
	}
	s.waiting, s.waitUntil = true, dl
	if dl != 0 && (s.dlAt == 0 || dl < s.dlAt) {
		s.dlAt = dl
		s.bus.waits.Add(dl, &s.dl, s)
	}
	return true
}

// stopWaiting marks the reader no longer parked, as it leaves its wait
// without a wake (its context, the pump's exit, a coalescing timer).
func (s *Subscription) stopWaiting() {
	s.mu.Lock()
	s.waiting = false
	s.mu.Unlock()
}

// ctxEnded is the subscribe context's watch (context.AfterFunc): it ends
// the subscription with the context's cause and frees its slot, whether or
// not anyone is reading. A method value, so that the watch captures only s.
func (s *Subscription) ctxEnded() { s.bus.cancel(s, context.Cause(s.ctx), true) }

// deadlineDue is the deadline queue's wake callback (Bus.waits, see
// NextBefore): s's entry for deadline at fired at now. It wakes s's reader
// when it is still parked past its deadline; one whose deadline moved on
// re-enters the queue with it, under s.mu as parkLocked does, so that an
// end cannot come between. Lock order: Subscription.mu before the queue's
// own lock; the queue calls this with its lock released.
func (b *Bus) deadlineDue(s *Subscription, at, now int64) {
	s.mu.Lock()
	if s.dlAt == at {
		s.dlAt = 0
	}
	var wake bool
	if s.waiting && s.waitUntil != 0 {
		if s.waitUntil <= now {
			wake = s.takeWakeLocked()
		} else if s.dlAt == 0 || s.waitUntil < s.dlAt {
			s.dlAt = s.waitUntil
			b.waits.Add(s.waitUntil, &s.dl, s)
		}
	}
	s.mu.Unlock()
	if wake {
		s.sendWake()
	}
}
