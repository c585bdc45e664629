package eventbus

import (
	"sync"

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

// registerLocked puts s into the lists its scope needs. b.mu must be held.
func (b *Bus) registerLocked(s *Subscription) {
	s.pos = [2]int{-1, -1}
	x := s.sess
	x.nsubs++
	x.info.nsubs.Store(int32(x.nsubs))
	b.nsubs++
	switch s.kind {
	case scope.All:
		b.all.add(s, 1)
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

// unregisterLocked removes s from every list. b.mu must be held. It is a
// no-op for a subscriber that is not registered.
func (b *Bus) unregisterLocked(s *Subscription) {
	if s.pos == [2]int{-1, -1} {
		return
	}
	x := s.sess
	switch s.kind {
	case scope.All:
		b.all.remove(s, 1)
	case scope.Descendants:
		x.desc.remove(s, 1)
	case scope.Subtree:
		if p := x.parent(); p != nil {
			p.childSubtree.remove(s, 1)
		}
	}
	x.own.remove(s, 0)
	s.pos = [2]int{-1, -1}
	x.nsubs--
	x.info.nsubs.Store(int32(x.nsubs))
	b.nsubs--
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

// fanOutLocked offers r, just published to session x, to every subscriber
// whose scope covers x. b.mu must be held.
func (b *Bus) fanOutLocked(x *session, r *record, forced bool) {
	droppable := false
	if b.droppable != nil {
		_, droppable = b.droppable[r.typ]
	}
	b.offerLocked(&x.own, nil, r, droppable, forced)
	p := x.parent()
	for a := p; a != nil; a = a.parent() {
		b.offerLocked(&a.desc, nil, r, droppable, forced)
	}
	b.offerLocked(&x.childSubtree, nil, r, droppable, forced)
	if p != nil {
		b.offerLocked(&p.childSubtree, x, r, droppable, forced)
	}
	b.offerLocked(&b.all, nil, r, droppable, forced)
}

// offerLocked offers r to each subscriber of l except those made on skip.
func (b *Bus) offerLocked(l *subList, skip *session, r *record, droppable, forced bool) {
	for i := 0; i < len(*l); i++ {
		s := (*l)[i]
		if skip != nil && s.sess == skip {
			continue
		}
		if forced {
			s.mu.Lock()
			wake := false
			if !s.ended {
				s.q = append(s.q, entry{rec: r, kind: entryForced})
				wake = s.takeWakeLocked()
				b.stats.Delivered++
			}
			s.mu.Unlock()
			if wake {
				b.wakeLater(s)
			}
			continue
		}
		o, wake := s.deliver(r, droppable)
		if wake {
			b.wakeLater(s)
		}
		switch o {
		case outcomeQueued:
			b.stats.Delivered++
		case outcomeWarned:
			b.stats.Delivered++
			b.stats.Warnings++
			b.diagnose(DiagSlowClientWarning, s, r)
		case outcomeDropped:
			b.stats.Dropped++
			b.diagnose(DiagDropped, s, r)
		case outcomeDroppedOld:
			b.stats.Delivered++
			b.stats.Dropped++
			b.diagnose(DiagDropped, s, r)
		case outcomeEvicted:
			b.stats.Evicted++
			b.diagnose(DiagEvicted, s, r)
			b.unregisterLocked(s) // its slot is free at once
			s.stopWatch()
			i-- // the last subscriber of l moved into slot i
		}
	}
}

// wakeLater sends s its wake-up: at once, or — on the publish path, which
// sets b.deferWakes — after the bus lock is released (Bus.sendWakes), so that
// waking a parked goroutine is never paid with the bus lock held. b.mu must
// be held.
func (b *Bus) wakeLater(s *Subscription) {
	if b.deferWakes {
		b.wakes = append(b.wakes, s)
		return
	}
	s.sendWake()
}

// takeWakesLocked ends the deferral and returns the wake-ups collected since
// it began, to be sent with sendWakes once b.mu is released. b.mu must be
// held.
func (b *Bus) takeWakesLocked() *[]*Subscription {
	b.deferWakes = false
	if len(b.wakes) == 0 {
		return nil
	}
	p := wakeLists.Get().(*[]*Subscription)
	*p, b.wakes = b.wakes, (*p)[:0]
	return p
}

// sendWakes sends the wake-ups takeWakesLocked returned; b.mu must not be
// held.
func sendWakes(p *[]*Subscription) {
	if p == nil {
		return
	}
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
