package eventbus

import (
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// Flow control of one subscriber's live queue (docs/protocol.md, Frames):
// the rules (limits, warning, drops, policies) are internal/queue's; here
// the subscription takes its lock around them, ends itself on an eviction
// and wakes its consumer. deliver runs on a publisher's goroutine with the
// lock that guards the subscriber's list held (its session tree's lock,
// index.all.mu for "all", or the structure lock) and takes s.mu itself; it
// never blocks. The wake-up of a parked consumer is the caller's to send
// (deliver reports it), so that the publish path sends it after releasing
// its locks.

// figuresLocked describes s's live queue now. s.mu must be held.
func (s *Subscription) figuresLocked() frame.QueueFigures { return s.q.Figures(&s.rd) }

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
func (s *Subscription) takeWakeLocked() bool { return s.takeWake() }

// takeWake is takeWakeLocked for a publisher without s.mu (a lock-free
// delivery): the mark is cleared by compare-and-swap, so exactly one of
// the callers that find it set sends the wake-up.
func (s *Subscription) takeWake() bool {
	return s.waiting.Load() && s.waiting.CompareAndSwap(true, false)
}

// sendWake hands the parked consumer its wake-up; it never blocks (the
// channel holds one token, and a token already there wakes it as well).
func (s *Subscription) sendWake() {
	if testHookWake != nil {
		testHookWake()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// testHookWake, when set by a test or benchmark, runs on every wake-up
// sent to a parked consumer (sendWake), on the sender's goroutine: it
// counts the goroutine hand-offs a workload pays. Set it only while no
// other test publishes or ends subscriptions.
var testHookWake func()

// deliver offers a live event to the subscriber (its queue applies the
// limits and the policy: queue.Queue.Deliver). It reports what happened so
// the bus can count it and, for an eviction, unregister the subscriber
// (which has ended: it drains the queue, client_evicted last, then gets
// ErrEvicted), and whether the consumer is
// parked and needs a wake-up, which the caller sends (after releasing its
// locks on the publish path). An ended subscriber takes nothing (outcome
// 0).
func (s *Subscription) deliver(r *record, droppable bool) (queue.Outcome, bool) {
	if s.q.DeliverLockFree(r) {
		// Queued lock-free (far from every limit). A registered subscriber
		// has not ended: every end unregisters it first, under the lock
		// the caller holds. The lane's tail is stored before the mark is
		// read, and parkLocked sets the mark before it looks at the
		// lane again, so a reader that parks is always seen or sees r.
		return queue.Queued, s.takeWake()
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return 0, false
	}
	o := s.q.Deliver(&s.rd, s.sess.ID, r, droppable)
	wake := false
	if o == queue.Evicted {
		s.endLocked(ErrEvicted, false) // wakes the consumer itself
	} else {
		wake = s.takeWakeLocked()
	}
	s.mu.Unlock()
	return o, wake
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
	s.waiting.Store(true) // force the wake below
	s.wakeLocked()
	return true
}

func (s *Subscription) discardLocked() {
	s.discard.Store(true)
	s.q.Clear()
	if s.pump != nil {
		close(s.pump.abandon)
	}
}

// queuePolicy is p as the queue knows it; p is valid (Options.Validate,
// Subscribe).
func queuePolicy(p OverflowPolicy) queue.Policy {
	switch p {
	case DropOldest:
		return queue.DropOldest
	case DropNewest:
		return queue.DropNewest
	}
	return queue.DropSubscriber
}
