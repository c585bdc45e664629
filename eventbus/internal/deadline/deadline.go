package deadline

import (
	"math"
	"sync"
	"time"
)

// Slot is a waiter's place in a [Queue]; the zero value is "not queued".
// Embed one in each waiter. It is read and written under the queue's lock
// only.
type Slot struct{ idx int32 } // position+1 in the heap, 0 none

// Queued reports whether the slot has an entry in its queue. The caller
// must make sure no Add, Remove or firing runs at the same time (tests).
func (s *Slot) Queued() bool { return s.idx != 0 }

// Queue holds at most one entry per [Slot], each with a deadline on the
// queue's own clock ([Queue.Now]: nanoseconds on the monotonic clock since
// New; [Queue.At] converts a time.Time). The zero value is not usable:
// make one with [New]. All
// methods are safe for concurrent use; wake is never called with the
// queue's lock held, so it may Add (re-enter a waiter whose deadline moved
// on) and Remove.
type Queue[T any] struct {
	wake func(v T, at, now int64)
	base time.Time // the clock's origin (Now), with its monotonic reading

	mu     sync.Mutex
	closed bool      // Close: no timer is set any more
	h      []item[T] // min-heap by at; h[i].slot.idx == i+1
	timer  *time.Timer
	at     int64 // when the timer is set to fire (queue clock), 0 not set
}

type item[T any] struct {
	at   int64
	slot *Slot
	v    T
}

// New returns an empty queue that calls wake(v, at, now) for each entry
// (v, at) once at ≤ now (both on the queue's clock), after taking the entry
// out of the queue.
func New[T any](wake func(v T, at, now int64)) *Queue[T] {
	return &Queue[T]{wake: wake, base: time.Now()}
}

// Now returns the queue's clock: nanoseconds since New on the monotonic
// clock, plus one (so it is never 0, which callers may use for "none").
// It is the clock the timer runs on: a wall clock step moves nothing, and
// an entry is never taken out before Now has reached its deadline. In a
// testing/synctest bubble (a queue made there) it is the bubble's clock.
func (q *Queue[T]) Now() int64 { return int64(time.Since(q.base)) + 1 }

// At returns instant t on the queue's clock, as time.Time's own methods
// measure it: by t's monotonic clock reading when it has one (time.Now and
// what Add derives from it), otherwise by the wall clock at the call (as
// time.Until, context.WithDeadline). It saturates at the int64 range and
// is at least 1: an instant before New is already past.
func (q *Queue[T]) At(t time.Time) int64 {
	if t.Before(q.base) {
		return 1 // before the clock's origin: past, without reading the clock
	}
	now := time.Now()
	elapsed := now.Sub(q.base) + 1 // monotonic: both are time.Now readings
	d := t.Sub(now)                // saturates at ±292 years
	switch {
	case d > 0 && d > math.MaxInt64-elapsed:
		return math.MaxInt64
	case d < 1-elapsed:
		return 1
	}
	return int64(elapsed + d)
}

// Add queues v at deadline at in slot s, or moves s's entry earlier to at
// (an entry is never moved later: the waiter re-enters when it fires).
func (q *Queue[T]) Add(at int64, s *Slot, v T) {
	q.mu.Lock()
	if i := int(s.idx) - 1; i >= 0 {
		if at < q.h[i].at {
			q.h[i].at = at
			q.up(i)
		}
	} else {
		q.h = append(q.h, item[T]{at, s, v})
		s.idx = int32(len(q.h))
		q.up(len(q.h) - 1)
	}
	if !q.closed && (q.at == 0 || at < q.at) {
		q.armLocked(at)
	}
	q.mu.Unlock()
}

// Remove takes s's entry out of the queue, if it has one.
func (q *Queue[T]) Remove(s *Slot) {
	q.mu.Lock()
	if i := int(s.idx) - 1; i >= 0 {
		q.removeAt(i)
	}
	q.mu.Unlock()
}

// Close stops the timer for good; entries still queued never fire.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.at = 0
	q.mu.Unlock()
}

// Len returns the number of entries queued.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h)
}

// Closed reports whether Close was called.
func (q *Queue[T]) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// fire runs on the timer: it takes every entry that is due out of the
// queue, re-arms the timer for the rest, and then calls wake for each.
func (q *Queue[T]) fire() {
	var buf [16]item[T]
	due := buf[:0]
	q.mu.Lock()
	now := q.Now()
	for len(q.h) > 0 && q.h[0].at <= now {
		due = append(due, q.h[0])
		q.removeAt(0)
	}
	q.at = 0
	if len(q.h) > 0 && !q.closed {
		q.armLocked(q.h[0].at)
	}
	if len(q.h) == 0 && cap(q.h) > 1024 {
		q.h = nil // do not keep a burst-sized heap
	}
	q.mu.Unlock()
	for _, e := range due {
		q.wake(e.v, e.at, now)
	}
}

// armLocked sets the timer to fire at at. q.mu must be held.
func (q *Queue[T]) armLocked(at int64) {
	wait := time.Duration(at - q.Now())
	if q.timer == nil {
		q.timer = time.AfterFunc(wait, q.fire)
	} else {
		q.timer.Reset(wait)
	}
	q.at = at
}

func (q *Queue[T]) removeAt(i int) {
	q.h[i].slot.idx = 0
	last := len(q.h) - 1
	if i != last {
		q.h[i] = q.h[last]
		q.h[i].slot.idx = int32(i + 1)
	}
	q.h[last] = item[T]{}
	q.h = q.h[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
}

func (q *Queue[T]) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].slot.idx, q.h[j].slot.idx = int32(i+1), int32(j+1)
}

func (q *Queue[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if q.h[p].at <= q.h[i].at {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *Queue[T]) down(i int) {
	n := len(q.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && q.h[c+1].at < q.h[c].at {
			c++
		}
		if q.h[i].at <= q.h[c].at {
			return
		}
		q.swap(i, c)
		i = c
	}
}
