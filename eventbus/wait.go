package eventbus

import (
	"context"
	"errors"
	"math"
	"sync"
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
// noticed up to the runtime timer's latency late, never early.
//
// A coalescing subscription ([SubscribeOptions.Coalesce]) merges as Next
// does; a group held in its Throttle window stays held across an
// ErrTimeout. NextBefore must not be called concurrently with itself, Next,
// TryNext, Events or All.
func (s *Subscription) NextBefore(deadline time.Time) (ev Event, err error) {
	var dl int64
	switch {
	case deadline.IsZero():
	case deadline.After(lastDeadline):
		// Beyond what Unix ns in an int64 hold (2262): as good as none.
		// UnixNano would wrap it into the past.
	case deadline.Before(firstDeadline):
		dl = 1 // before 1970, possibly before 1678 (which UnixNano wraps into the future): past
	default:
		dl = deadline.UnixNano()
	}
	// No caller context: the plain-receive path of nextBefore, woken by
	// publishers, the deadline queue and the end of the subscription (its
	// context's watch included).
	return s.nextBefore(context.Background(), nil, dl)
}

// The deadlines NextBefore can keep as Unix ns: from 1 ns after 1970 (0
// means none) to the largest int64.
var (
	firstDeadline = time.Unix(0, 1)
	lastDeadline  = time.Unix(0, math.MaxInt64)
)

// parkLocked marks the reader parked until deadline dl (Unix ns, 0 none)
// and enters s into the deadline queue with dl when it has no entry there,
// or one later than dl. s.mu must be held: the entry is made in the same
// critical section that checked s has not ended, so that the end (which
// removes the entry under s.mu) cannot fall between them and leave an
// ended subscription queued until its deadline.
func (s *Subscription) parkLocked(dl int64) {
	s.waiting, s.waitUntil = true, dl
	if dl != 0 && (s.dlAt == 0 || dl < s.dlAt) {
		s.dlAt = dl
		s.bus.waits.add(dl, s)
	}
}

// ctxEnded is the subscribe context's watch (context.AfterFunc): it ends
// the subscription with the context's cause and frees its slot, whether or
// not anyone is reading. A method value, so that the watch captures only s.
func (s *Subscription) ctxEnded() { s.bus.cancel(s, context.Cause(s.ctx)) }

// deadlineQueue is a bus's queue of parked readers' deadlines (Bus.waits,
// see NextBefore): a min-heap by deadline, served by one runtime timer set
// to its earliest entry (one per bus, not per process, so that a bus and
// its timer live in the same testing/synctest bubble). It holds at most one entry per subscription, possibly
// earlier than that subscription's current deadline (deadlines move on
// lazily: the entry then fires, finds the reader's deadline later and
// re-enters it), never later. A subscription's entry is added and removed
// only with its mu held (parkLocked, fire's re-entry, the end), so an ended
// subscription has none. Lock order: Subscription.mu before
// deadlineQueue.mu; fire releases its lock before it takes a
// subscription's.
type deadlineQueue struct {
	mu     sync.Mutex
	closed bool            // Bus.Close: no timer is set any more
	h      []deadlineEntry // min-heap by at; h[i].s.dlIdx == i+1
	timer  *time.Timer     // calls fire; made on the first add
	at     int64           // when the timer is set to fire (Unix ns), 0 not set
}

type deadlineEntry struct {
	at int64 // Unix ns
	s  *Subscription
}

// add queues s with deadline at, or moves its entry earlier to at.
func (d *deadlineQueue) add(at int64, s *Subscription) {
	d.mu.Lock()
	if i := int(s.dlIdx) - 1; i >= 0 {
		if at < d.h[i].at {
			d.h[i].at = at
			d.up(i)
		}
	} else {
		d.h = append(d.h, deadlineEntry{at, s})
		s.dlIdx = int32(len(d.h))
		d.up(len(d.h) - 1)
	}
	if !d.closed && (d.at == 0 || at < d.at) {
		d.armLocked(at)
	}
	d.mu.Unlock()
}

// close stops the timer for good (Bus.Close: every subscription has ended,
// so nobody is parked).
func (d *deadlineQueue) close() {
	d.mu.Lock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.at = 0
	d.mu.Unlock()
}

// remove takes s's entry out of the queue, if it has one (an ended
// subscription is not kept alive until its deadline).
func (d *deadlineQueue) remove(s *Subscription) {
	d.mu.Lock()
	if i := int(s.dlIdx) - 1; i >= 0 {
		d.removeAt(i)
	}
	d.mu.Unlock()
}

// fire runs on the timer: it takes every entry that is due out of the
// queue, re-arms the timer for the rest, and then wakes each such reader
// that is still parked past its deadline; one whose deadline moved on
// re-enters the queue with it.
func (d *deadlineQueue) fire() {
	var buf [16]deadlineEntry
	due := buf[:0]
	d.mu.Lock()
	now := time.Now().UnixNano()
	for len(d.h) > 0 && d.h[0].at <= now {
		due = append(due, d.h[0])
		d.removeAt(0)
	}
	d.at = 0
	if len(d.h) > 0 && !d.closed {
		d.armLocked(d.h[0].at)
	}
	if len(d.h) == 0 && cap(d.h) > 1024 {
		d.h = nil // do not keep a burst-sized heap
	}
	d.mu.Unlock()
	for _, e := range due {
		s := e.s
		s.mu.Lock()
		if s.dlAt == e.at {
			s.dlAt = 0
		}
		var wake bool
		if s.waiting && s.waitUntil != 0 {
			if s.waitUntil <= now {
				wake = s.takeWakeLocked()
			} else if s.dlAt == 0 || s.waitUntil < s.dlAt {
				// Re-entered under s.mu, as parkLocked does, so that an
				// end cannot come between.
				s.dlAt = s.waitUntil
				d.add(s.waitUntil, s)
			}
		}
		s.mu.Unlock()
		if wake {
			s.sendWake()
		}
	}
}

// armLocked sets the timer to fire at at. d.mu must be held.
func (d *deadlineQueue) armLocked(at int64) {
	wait := time.Duration(at - time.Now().UnixNano())
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
	} else {
		d.timer.Reset(wait)
	}
	d.at = at
}

func (d *deadlineQueue) removeAt(i int) {
	d.h[i].s.dlIdx = 0
	last := len(d.h) - 1
	if i != last {
		d.h[i] = d.h[last]
		d.h[i].s.dlIdx = int32(i + 1)
	}
	d.h[last] = deadlineEntry{}
	d.h = d.h[:last]
	if i != last {
		d.down(i)
		d.up(i)
	}
}

func (d *deadlineQueue) swap(i, j int) {
	d.h[i], d.h[j] = d.h[j], d.h[i]
	d.h[i].s.dlIdx, d.h[j].s.dlIdx = int32(i+1), int32(j+1)
}

func (d *deadlineQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if d.h[p].at <= d.h[i].at {
			return
		}
		d.swap(i, p)
		i = p
	}
}

func (d *deadlineQueue) down(i int) {
	n := len(d.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && d.h[c+1].at < d.h[c].at {
			c++
		}
		if d.h[i].at <= d.h[c].at {
			return
		}
		d.swap(i, c)
		i = c
	}
}
