package eventbus

import "github.com/replaybus/replaybus/eventbus/frame"

// Flow control of one subscriber's live queue (docs/protocol.md, Frames), from qwen-code's
// EventBus (warning at 75 % with hysteresis, eviction with client_evicted,
// forced frames that never count), AgentPool's overflow policy names and
// OpenClaw's dropIfSlow. Every method here runs on a publisher's goroutine
// with the lock that guards the subscriber's list held (its session tree's
// lock, allMu for "all", or the structure lock) and takes s.mu itself; none
// of them blocks. The wake-up of a parked consumer is the caller's to send
// (deliver reports it), so that the publish path sends it after releasing
// its locks.

// liveLocked returns the live frames and bytes queued and not yet taken by
// the consumer, exactly: it refreshes the publisher's copy of the
// consumer's counters. s.mu must be held.
func (s *Subscription) liveLocked() (frames, bytes int64) {
	s.seen = s.consumed.Load()
	return unpackLive(s.enq - s.seen)
}

// liveBoundLocked is liveLocked from the publisher's copy of the
// consumer's counters, without reading them: an upper bound (the consumer
// only ever takes), exact as of the last refresh. deliver uses it away from
// every threshold, so that a delivery does not pull the cache line the
// consumer writes on each event; near a threshold it refreshes, so every
// decision and every figure is the one the exact values give. s.mu must be
// held.
func (s *Subscription) liveBoundLocked() (frames, bytes int64) {
	return unpackLive(s.enq - s.seen)
}

func (s *Subscription) figuresLocked() frame.QueueFigures {
	f, b := s.liveLocked()
	return frame.QueueFigures{QueueSize: int(f), MaxQueued: s.maxQueued, QueuedBytes: b, MaxQueuedBytes: s.maxBytes}
}

// wakeLocked wakes a consumer blocked in Next. s.mu must be held.
func (s *Subscription) wakeLocked() {
	if s.takeWakeLocked() {
		s.sendWake()
	}
}

// takeWakeLocked reports whether the consumer is parked and must be woken,
// and clears the mark, so that exactly one wake-up is sent: by the caller,
// possibly after it released its locks (see fan.wake). s.mu must be
// held.
func (s *Subscription) takeWakeLocked() bool {
	if s.waiting {
		s.waiting = false
		return true
	}
	return false
}

// sendWake hands the parked consumer its wake-up; it never blocks (the
// channel holds one token, and a token already there wakes it as well).
func (s *Subscription) sendWake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver offers a live event to the subscriber. It reports what happened so
// the bus can count it and, for an eviction, unregister the subscriber, and
// whether the consumer is parked and needs a wake-up, which the caller sends
// (after releasing its locks on the publish path).
func (s *Subscription) deliver(r *record, droppable bool) (outcome, bool) {
	s.mu.Lock()
	o := s.deliverLocked(r, droppable)
	wake := o != outcomeIgnored && o != outcomeEvicted && s.takeWakeLocked()
	s.mu.Unlock()
	return o, wake
}

func (s *Subscription) deliverLocked(r *record, droppable bool) outcome {
	if s.ended {
		return outcomeIgnored
	}
	max, maxB := int64(s.maxQueued), s.maxBytes
	cost := int64(len(r.data))
	frames, bytes := s.liveBoundLocked()
	// Every threshold below (warning at 75 % counting this event, the
	// droppable cut at 75 %, overflow, the warning's re-arm) implies this
	// condition; the bound is at least the exact value, so when the bound
	// does not meet it, the exact values decide nothing either.
	if s.warned || (frames+1)*4 >= max*3 || (bytes+cost)*4 >= maxB*3 {
		frames, bytes = s.liveLocked()
	}
	if s.warned && frames*8 <= max*3 && bytes*8 <= maxB*3 {
		s.warned = false // hysteresis: re-armed at ≤ 37.5 % on both axes
	}
	if droppable && (frames*4 >= max*3 || bytes*4 >= maxB*3) {
		s.dropNewestLocked(r) // OpenClaw's dropIfSlow
		return outcomeDropped
	}
	overFrames := frames >= max
	overBytes := frames > 0 && bytes+cost > maxB
	if overFrames || overBytes {
		switch s.policy {
		case DropNewest:
			s.dropNewestLocked(r)
			return outcomeDropped
		case DropOldest:
			if !s.dropOldestLocked(cost) {
				s.dropNewestLocked(r)
				return outcomeDropped
			}
			s.pushLiveLocked(r, cost)
			return outcomeDroppedOld
		default:
			reason := frame.ReasonQueueOverflow
			if !overFrames {
				reason = frame.ReasonQueueBytesOverflow
			}
			s.evictLocked(r, reason)
			return outcomeEvicted
		}
	}
	s.pushLiveLocked(r, cost)
	if s.warnOn && !s.warned {
		frames, bytes = frames+1, bytes+cost
		f, b := frames*4 >= max*3, bytes*4 >= maxB*3
		if f || b {
			s.warned = true
			th := "frames"
			switch {
			case f && b:
				th = "frames_and_bytes"
			case b:
				th = "bytes"
			}
			s.q = append(s.q, synth(s.sess.id, frame.TypeSlowClientWarning, frame.SlowClientWarningData{
				QueueFigures: s.figuresLocked(), LastEventID: r.id, Threshold: th,
			}, r.nanos))
			return outcomeWarned
		}
	}
	return outcomeQueued
}

type outcome uint8

const (
	outcomeIgnored outcome = iota
	outcomeQueued
	outcomeWarned
	outcomeDropped    // the new event was dropped
	outcomeDroppedOld // an older event was dropped, the new one queued
	outcomeEvicted
)

func (s *Subscription) pushLiveLocked(r *record, cost int64) {
	s.q = append(s.q, entry{rec: r})
	s.enq += packLive(cost)
}

// pushLocked queues a frame that never counts against the limits (replay,
// synthetic frames, session_closed).
func (s *Subscription) pushLocked(e entry) {
	s.q = append(s.q, e)
	s.wakeLocked()
}

// dropNewestLocked drops r for this subscriber and announces it: the run is
// merged into an events_dropped frame at the tail of the queue, or a new one
// is appended, so the frame stands exactly where the gap is.
func (s *Subscription) dropNewestLocked(r *record) {
	if n := len(s.q); n > s.qh && s.q[n-1].kind == entryDropped {
		d := s.q[n-1].drop
		d.last = r.id
		d.count++
		return
	}
	s.q = append(s.q, entry{
		rec:  &record{session: s.sess.id, typ: frame.TypeStateResyncRequired, nanos: r.nanos},
		kind: entryDropped,
		drop: &dropInfo{first: r.id, last: r.id, count: 1},
	})
}

// dropOldestLocked drops the oldest queued live events until cost more bytes
// and one more frame fit, replacing them by one events_dropped frame placed
// where they stood. It returns false when no queued live event is left to
// drop (the consumer already holds them all).
func (s *Subscription) dropOldestLocked(cost int64) bool {
	for {
		frames, bytes := s.liveLocked()
		if frames < int64(s.maxQueued) && (frames == 0 || bytes+cost <= s.maxBytes) {
			return true
		}
		i := s.qh
		for i < len(s.q) && s.q[i].kind != entryLive { // targeted frames are not the policy's to drop
			i++
		}
		if i == len(s.q) {
			return false
		}
		victim := s.q[i].rec
		s.enq -= packLive(int64(len(victim.data)))
		// Extend the run before the victim when nothing with an id stands
		// between them (a slow_client_warning may): one gap, one frame.
		j := i - 1
		for j >= s.qh && s.q[j].kind == entryFrame {
			j--
		}
		if j >= s.qh && s.q[j].kind == entryDropped {
			d := s.q[j].drop
			d.last = victim.id
			d.count++
			copy(s.q[s.qh+1:i+1], s.q[s.qh:i])
			s.q[s.qh] = entry{}
			s.qh++
			continue
		}
		s.q[i] = entry{
			rec:  &record{session: s.sess.id, typ: frame.TypeStateResyncRequired, nanos: victim.nanos},
			kind: entryDropped,
			drop: &dropInfo{first: victim.id, last: victim.id, count: 1},
		}
	}
}

// evictLocked ends the subscriber under the drop_subscriber policy: the
// client_evicted frame goes after everything already queued, and the
// consumer drains the queue and then gets ErrEvicted (qwen-code's eviction
// flow). r is the event that did not fit.
func (s *Subscription) evictLocked(r *record, reason string) {
	s.q = append(s.q, synth(s.sess.id, frame.TypeClientEvicted, frame.ClientEvictedData{
		QueueFigures: s.figuresLocked(), Reason: reason, DroppedAfter: r.id,
	}, r.nanos))
	s.endLocked(ErrEvicted, false)
}

// endLocked marks the subscription ended with reason. With discard the queue
// is dropped (Close, cancellation: nobody is listening); otherwise the
// consumer drains it first. s.mu must be held. It reports false when the
// subscription had already ended.
func (s *Subscription) endLocked(reason error, discard bool) bool {
	if s.ended {
		if discard && !s.discard.Load() {
			s.discardLocked()
		}
		return false
	}
	s.ended, s.reason = true, reason
	if discard {
		s.discardLocked()
	}
	if s.done != nil {
		close(s.done)
	}
	if s.dlAt != 0 {
		s.bus.waits.Remove(&s.dl)
		s.dlAt = 0
	}
	s.waiting = true // force the wake below
	s.wakeLocked()
	return true
}

func (s *Subscription) discardLocked() {
	s.discard.Store(true)
	clear(s.q)
	s.q, s.qh = nil, 0
	if s.pump != nil {
		close(s.pump.abandon)
	}
}
