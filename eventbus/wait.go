package eventbus

// Waiting for frames with a deadline: NextBefore and NextBatch, the
// stream writer's waits, park a reader on its subscription and queue its
// deadline in the bus's one deadline queue (internal/deadline), served by
// one timer.

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

// NextBefore is [Subscription.Next] with a deadline instead of a context:
// it returns ErrTimeout when deadline passes first (the subscription stays
// usable). A zero deadline waits without one. It allocates nothing while it
// waits. Not safe for concurrent use with itself, Next, TryNext, Events or
// All.
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
	if testHookPark != nil {
		testHookPark()
	}
	s.waiting.Store(true)
	s.waitUntil = dl
	if dl != 0 && (s.dlAt == 0 || dl < s.dlAt) {
		s.dlAt = dl
		s.bus.waits.Add(dl, &s.dl, s)
	}
	// A lock-free delivery (deliver) stores the lane's tail, then reads
	// the mark; here the mark is set, then the lane read again. When a
	// record landed in between and its publisher did not take the mark,
	// the reader takes it back and gives itself the token, so that its
	// wait returns at once.
	if s.q.Pending() && s.waiting.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// testHookPark, when set by a test, runs in parkLocked after the reader
// found nothing queued and before it sets its parked mark (s.mu held): a
// lock-free delivery there must still wake it. Set it only while no other
// test reads.
var testHookPark func()

// stopWaiting marks the reader no longer parked, as it leaves its wait
// without a wake (its context, the pump's exit, a coalescing timer).
func (s *Subscription) stopWaiting() {
	s.mu.Lock()
	s.waiting.Store(false)
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
	if s.waiting.Load() && s.waitUntil != 0 {
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

// NextBatch waits as [Subscription.NextBefore] does for the next frame, then
// writes it and every further frame ready without waiting into buf, in
// delivery order, and returns how many (1 to len(buf)). The live frames it
// takes leave the live-queue limits when it returns. On an error it
// returns 0 and NextBefore's error; an empty buf is ErrInvalid. It allocates
// nothing. Not safe for concurrent use with the other readers.
func (s *Subscription) NextBatch(deadline time.Time, buf []Event) (int, error) {
	if len(buf) == 0 {
		return 0, invalidf("NextBatch: buf has length 0")
	}
	dl := s.deadlineOf(deadline)
	if s.co != nil {
		// Coalescing: each frame may merge what is queued; take them one
		// by one as Next and TryNext do.
		ev, err := s.nextMergedBefore(context.Background(), nil, dl)
		if err != nil {
			return 0, err
		}
		buf[0] = ev
		n := 1
		for n < len(buf) {
			ev, ok := s.tryNextMerged()
			if !ok {
				break
			}
			buf[n] = ev
			n++
		}
		return n, nil
	}
	for {
		if n := s.fill(buf); n > 0 {
			return n, nil
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
			return 0, err
		}
		if dl == 1 {
			// A deadline before the bus's clock began (time.Unix(1, 0), a
			// reader asking for what is ready): past without a clock read.
			s.mu.Unlock()
			return 0, ErrTimeout
		}
		parked := s.parkLocked(dl)
		s.mu.Unlock()
		if !parked {
			return 0, ErrTimeout
		}
		// No caller context: the subscription's own end, the deadline
		// queue and publishers wake the reader, as in NextBefore.
		<-s.wake
	}
}

// fill writes into buf every frame that is ready without waiting, up to
// len(buf), and returns how many: the replay snapshot in one tight loop
// (replayInto), then reinsert frame by frame, draining the shared queue
// when the local batch is spent and more is pending.
//
// What the live frames take out of the queue's limits is published once
// per batch, not per frame (owed): before each s.mu, so that a publisher
// that read the counter before it cannot have its event left out of this
// batch by the drain that follows, and before the batch is returned. A
// publisher deciding meanwhile sees the frames of the batch still queued,
// as if it had published just before the batch was taken.
func (s *Subscription) fill(buf []Event) int {
	var owed uint64
	defer s.rd.Settle(&owed)
	n := 0
	for n < len(buf) {
		if s.rd.Replaying() {
			n += s.replayInto(buf[n:])
			if n == len(buf) {
				break
			}
		}
		if s.reinsertOwing(&buf[n], &owed) {
			n++
			continue
		}
		if n == 0 {
			return 0 // the caller waits
		}
		s.rd.Settle(&owed)
		s.mu.Lock()
		pending := s.q.Pending() && !s.discard.Load()
		if pending {
			s.drain()
		}
		s.mu.Unlock()
		if !pending {
			break
		}
	}
	return n
}

// replayInto is reinsert's replay step for a batch: it writes the next
// records of the replay snapshot into buf, in id order past the reinsert
// guard, and returns how many. It does nothing while leading frames are
// due (reinsert hands those out first) or once the end discarded the
// queue. Each record is read once, in a loop that does nothing else, so
// that the loads of consecutive records (the replay's cache misses)
// overlap.
func (s *Subscription) replayInto(buf []Event) int {
	if len(s.lead) > 0 || s.discard.Load() {
		return 0
	}
	n := 0
	for n < len(buf) {
		recs := s.rd.NextReplays(len(buf) - n)
		if recs == nil {
			break
		}
		for _, r := range recs {
			if r.ID <= s.lastSeen {
				s.bus.idx.cnt.guarded.Add(1)
				continue
			}
			s.lastSeen = r.ID
			// fillEvent, by its halves: inlined, no call per record.
			fillHead(&buf[n], r)
			fillTail(&buf[n], r.Ext, true)
			n++
		}
		clear(recs) // let the data go once read
	}
	return n
}

// deadlineOf converts a NextBefore deadline to the deadline queue's clock:
// 0 for none (the zero time, or one past 2262).
func (s *Subscription) deadlineOf(deadline time.Time) int64 {
	if deadline.IsZero() || deadline.After(lastDeadline) {
		return 0
	}
	// By its monotonic reading, not its wall reading: time.Now reads the
	// two clocks one after the other, so a thread preempted in between
	// (milliseconds on a loaded machine) leaves the wall reading earlier,
	// and a wall clock step moves it.
	return s.bus.waits.At(deadline)
}
