package eventbus

import (
	"context"
	"time"
)

// NextBatch is [Subscription.NextBefore] for a reader that takes frames in
// batches, as a stream writer does before one flush: it waits as
// NextBefore does for the next frame, writes it into buf[0], then every
// further frame that is ready without waiting into buf[1:], in delivery
// order, and returns how many it wrote: at least 1 and at most len(buf).
// On an error it writes nothing and returns 0 and the error NextBefore
// would (ErrTimeout after the deadline, the subscription's end reason once
// everything queued before the end was read). A buf of length 0 is an
// ErrInvalid.
//
// The frames are those Next, NextBefore and TryNext hand out — replay
// first (Replay set), then replay_complete, then live events and the
// synthetic frames among them, each id at most once and in increasing
// order, type filters and coalescing applied — built in place in buf:
// nothing is allocated and no Event is copied on its way out. A replay is
// read straight from the snapshot of shared records, one tight loop per
// batch (see docs/benchmarks.md, "W3 replay (issue 22.2)"); a reader that
// keeps buf between calls (64 frames is the SSE handler's batch) reads a
// 10,000-event replay in about 160 calls. A deadline before the bus was
// made (time.Unix(1, 0)) asks for what is ready without reading the clock.
//
// It may be mixed with Next, NextBefore and TryNext on one goroutine, and
// must not be called concurrently with any of them, Events or All.
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
func (s *Subscription) fill(buf []Event) int {
	n := 0
	for n < len(buf) {
		if s.rd.Replaying() {
			n += s.replayInto(buf[n:])
			if n == len(buf) {
				break
			}
		}
		if s.reinsert(&buf[n]) {
			n++
			continue
		}
		if n == 0 {
			return 0 // the caller waits
		}
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
