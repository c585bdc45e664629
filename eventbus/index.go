package eventbus

import (
	"sync"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// Registration index. A subscriber made on session X with scope k sits in at
// most two lists, so that a publish to session S reaches exactly the
// subscribers whose scope covers S, each once, in O(matching subscribers +
// depth of S):
//
//	list (slot)                 holds                             hears S when
//	X.own (0)                   every non-"all" subscriber of X   S == X
//	X.desc (1)                  scope descendants                 X is a proper ancestor of S
//	parent(X).childSubtree (1)  scope subtree                     S == parent(X), or S is a sibling of X
//	bus.all (1)                 scope all                         always
//
// Each subscriber remembers its index in both lists for O(1) removal.

type subList []*Subscription

func (l *subList) add(s *Subscription, slot int) {
	s.pos[slot] = len(*l)
	*l = append(*l, s)
}

func (l *subList) remove(s *Subscription, slot int) {
	i := s.pos[slot]
	last := len(*l) - 1
	if i < 0 || i > last || (*l)[i] != s {
		return
	}
	(*l)[i] = (*l)[last]
	(*l)[i].pos[slot] = i
	(*l)[last] = nil
	*l = (*l)[:last]
	s.pos[slot] = -1
}

// registerLocked puts s into the lists its scope needs. The caller holds
// s.sess's tree lock under b.mu's read side (session, descendants and
// subtree scopes: their lists all lie in that tree), or b.mu exclusively
// (required for the all scope).
func (b *Bus) registerLocked(s *Subscription) {
	s.pos = [2]int{-1, -1}
	x := s.sess
	x.info.nsubs.Add(1)
	b.cnt.nsubs.Add(1)
	switch s.kind {
	case scope.All:
		b.all.list.add(s, 1)
		b.all.n.Add(1)
		return
	case scope.Descendants:
		x.desc.add(s, 1)
	case scope.Subtree:
		if p := x.parent(); p != nil {
			p.childSubtree.add(s, 1)
		}
	}
	x.own.add(s, 0)
}

// unregisterLocked removes s from every list. The caller holds what
// guards them: s.sess's tree lock (allMu for an "all" subscriber) under
// b.mu's read side, or b.mu exclusively. It is a no-op for a subscriber
// that is not registered.
func (b *Bus) unregisterLocked(s *Subscription) {
	if s.pos == [2]int{-1, -1} {
		return
	}
	x := s.sess
	switch s.kind {
	case scope.All:
		// Not in x.own: x's lists belong to x's tree, which an "all"
		// subscriber's unsubscribe need not hold.
		b.all.list.remove(s, 1)
		b.all.n.Add(-1)
	case scope.Descendants:
		x.desc.remove(s, 1)
	case scope.Subtree:
		if p := x.parent(); p != nil {
			p.childSubtree.remove(s, 1)
		}
	}
	if s.kind != scope.All {
		x.own.remove(s, 0)
	}
	s.pos = [2]int{-1, -1}
	x.info.nsubs.Add(-1)
	b.cnt.nsubs.Add(-1)
	x.touch(b.nowNanos())
}

// reparentLocked moves x's subtree subscribers from the old parent's list to
// the new one's; called when a session gets a parent after subscribers
// joined it.
func (b *Bus) reparentLocked(x *session, from, to *session) {
	for _, s := range x.own {
		if s.kind != scope.Subtree {
			continue
		}
		if from != nil {
			from.childSubtree.remove(s, 1)
		}
		if to != nil {
			to.childSubtree.add(s, 1)
		}
	}
}

// fan is one fan-out's scratch, local to the call that fans out (so that
// fan-outs of distinct session trees share nothing): the wake-ups of parked
// consumers, sent by release once the caller holds no lock (nil wakes:
// each is sent at once, for callers that fan out rarely), and the count of
// deliveries, added to the bus's counter once per event.
type fan struct {
	wakes     *[]*Subscription
	delivered int64
}

// wake sends s its wake-up, or collects it for release.
func (f *fan) wake(s *Subscription) {
	if f.wakes == nil {
		s.sendWake()
		return
	}
	*f.wakes = append(*f.wakes, s)
}

// release sends the collected wake-ups and recycles the list. No bus lock
// may be held: waking a parked goroutine is never paid inside a critical
// section.
func (f *fan) release() {
	p := f.wakes
	if p == nil {
		return
	}
	f.wakes = nil
	for i, s := range *p {
		s.sendWake()
		(*p)[i] = nil
	}
	*p = (*p)[:0]
	wakeLists.Put(p)
}

// wakeLists recycles the wake-up lists of the publish path, so that a
// publish allocates none in steady state.
var wakeLists = sync.Pool{New: func() any { return new([]*Subscription) }}

// fanOutLocked offers r, just published to session x, to every subscriber
// in x's tree whose scope covers x (the "all" subscribers are offered it by
// appendLocked). The caller holds x's tree lock under b.mu's read side, or
// b.mu exclusively.
func (b *Bus) fanOutLocked(x *session, r *record, droppable, forced bool, f *fan) {
	b.offerLocked(&x.own, nil, r, droppable, forced, f)
	p := x.parent()
	for a := p; a != nil; a = a.parent() {
		b.offerLocked(&a.desc, nil, r, droppable, forced, f)
	}
	b.offerLocked(&x.childSubtree, nil, r, droppable, forced, f)
	if p != nil {
		b.offerLocked(&p.childSubtree, x, r, droppable, forced, f)
	}
}

// offerLocked offers r to each subscriber of l except those made on skip.
// It holds each subscriber's mutex only for that subscriber (inside
// deliver); it never blocks on a consumer. The caller holds the lock that
// guards l.
func (b *Bus) offerLocked(l *subList, skip *session, r *record, droppable, forced bool, f *fan) {
	for i := 0; i < len(*l); i++ {
		s := (*l)[i]
		if skip != nil && s.sess == skip {
			continue
		}
		if forced {
			// session_closed reaches every subscriber, whatever its types.
			s.mu.Lock()
			wake := false
			if !s.ended {
				s.q.Push(entry{Rec: r, Kind: queue.KindForced})
				wake = s.takeWakeLocked()
				f.delivered++
			}
			s.mu.Unlock()
			if wake {
				f.wake(s)
			}
			continue
		}
		if s.filter != nil && !s.filter.has(r.Type) {
			continue
		}
		o, wake := s.deliver(r, droppable)
		if wake {
			f.wake(s)
		}
		if o.Delivered() {
			f.delivered++
		}
		switch o {
		case queue.Warned:
			b.cnt.warnings.Add(1)
			b.diagnose(observe.DiagSlowClientWarning, s, r)
		case queue.Dropped, queue.DroppedOld:
			b.cnt.dropped.Add(1)
			b.diagnose(observe.DiagDropped, s, r)
		case queue.Evicted:
			b.cnt.evicted.Add(1)
			b.diagnose(observe.DiagEvicted, s, r)
			b.unregisterLocked(s) // its slot is free at once
			s.stopWatch()
			i-- // the last subscriber of l moved into slot i
		}
	}
}
