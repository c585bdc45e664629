package eventbus

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus/internal/diag"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/scope"
)

// The delivery index: which subscribers hear a publish. A subscriber made
// on session X with scope k sits in at most two lists, so that a publish
// to session S reaches exactly the subscribers whose scope covers S, each
// once, in O(matching subscribers + depth of S):
//
//	list (slot)                 holds                             hears S when
//	X.own (0)                   every non-"all" subscriber of X   S == X
//	X.desc (1)                  scope descendants                 X is a proper ancestor of S
//	parent(X).childSubtree (1)  scope subtree                     S == parent(X), or S is a sibling of X
//	index.all (1)               scope all                         always
//
// Each subscriber remembers its index in both lists for O(1) removal. A
// session's lists (subs) live beside its history and are guarded like it:
// by its tree's lock under the structure lock's read side, or by the
// structure lock held exclusively; the "all" list by index.all.mu (see the
// lock order in publish.go).

// subs are one session's subscriber lists.
type subs struct {
	own          subList                  // subscribers made on this session (all scopes but "all")
	desc         subList                  // those of own with scope descendants
	childSubtree subList                  // subtree subscribers made on this session's children
	pres         atomic.Pointer[presence] // the session's presence (presence.go), made when first needed
}

// index is the delivery index of a bus: the "all" subscribers, the
// counters of what delivery did, and the diagnostics it queued (delivered
// after every lock is released: flush).
type index struct {
	all       allSubs
	droppable map[string]struct{} // Options.DroppableTypes
	now       func() time.Time
	report    *slog.Logger // Options.Diagnostics
	logger    *slog.Logger // Options.Logger
	hub       *presenceHub // who is attached to each session (presence.go)

	_    [64]byte // the counters, written on subscribe, off the line publishers read all.n on
	cnt  counters
	diag diag.Aggregator
}

// allSubs are the "all" subscribers: the list is guarded by mu under the
// structure lock's read side (a publisher's ordering step, an unsubscribe),
// or by the structure lock held exclusively (an "all" subscribe adds only
// then). n mirrors its length: it rises only under the structure lock held
// exclusively, so a publisher that reads 0 under the read side knows no
// "all" subscriber can appear before it is done.
type allSubs struct {
	list subList
	mu   sync.Mutex
	n    atomic.Int32
}

// counters are the figures of [observe.Stats] that delivery, subscribing
// and reading write, kept off every lock in atomics.
type counters struct {
	nextSub  atomic.Uint64 // the last subscriber id given out
	nsubs    atomic.Int64  // live subscribers (Stats.Subscribers)
	guarded  atomic.Int64  // Stats.Guarded, written by consumers
	replayed atomic.Int64  // Stats.Replayed, written by subscribes
	dropped  atomic.Uint64
	evicted  atomic.Uint64
	warnings atomic.Uint64
	resyncs  atomic.Uint64 // state_resync_required frames, decided anywhere
}

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

// register puts s into the lists its scope needs. The caller holds
// s.sess's tree lock under the structure lock's read side (session,
// descendants and subtree scopes: their lists all lie in that tree), or the
// structure lock exclusively (required for the all scope).
func (ix *index) register(s *Subscription) {
	s.pos = [2]int{-1, -1}
	x := s.sess
	x.AddSubscribers(1)
	ix.cnt.nsubs.Add(1)
	ix.hub.join(s)
	switch s.kind {
	case scope.All:
		ix.all.list.add(s, 1)
		ix.all.n.Add(1)
		return
	case scope.Descendants:
		x.Subs.desc.add(s, 1)
	case scope.Subtree:
		if p := x.Parent(); p != nil {
			p.Subs.childSubtree.add(s, 1)
		}
	}
	x.Subs.own.add(s, 0)
}

// unregister removes s from every list. The caller holds what guards
// them: s.sess's tree lock (all.mu for an "all" subscriber) under the
// structure lock's read side, or the structure lock exclusively. It is a
// no-op for a subscriber that is not registered.
func (ix *index) unregister(s *Subscription) {
	if s.pos == [2]int{-1, -1} {
		return
	}
	x := s.sess
	switch s.kind {
	case scope.All:
		// Not in x's lists: they belong to x's tree, which an "all"
		// subscriber's unsubscribe need not hold.
		ix.all.list.remove(s, 1)
		ix.all.n.Add(-1)
	case scope.Descendants:
		x.Subs.desc.remove(s, 1)
	case scope.Subtree:
		if p := x.Parent(); p != nil {
			p.Subs.childSubtree.remove(s, 1)
		}
	}
	if s.kind != scope.All {
		x.Subs.own.remove(s, 0)
	}
	s.pos = [2]int{-1, -1}
	x.AddSubscribers(-1)
	ix.cnt.nsubs.Add(-1)
	ix.hub.leave(s)
	x.Touch(ix.now().UnixNano())
}

// reparent moves x's subtree subscribers from the old parent's list to
// the new one's, when x is attached to a parent or its parent closes. The
// structure lock is held exclusively.
func (ix *index) reparent(x *session, from, to *session) {
	for _, s := range x.Subs.own {
		if s.kind != scope.Subtree {
			continue
		}
		if from != nil {
			from.Subs.childSubtree.remove(s, 1)
		}
		if to != nil {
			to.Subs.childSubtree.add(s, 1)
		}
	}
}

// endSession unregisters the subscribers made on x, every scope, and ends
// them with ErrSessionClosed once they have drained (x is closing). The
// structure lock is held exclusively.
func (ix *index) endSession(x *session) {
	for len(x.Subs.own) > 0 {
		s := x.Subs.own[len(x.Subs.own)-1]
		ix.unregister(s)
		s.end(ErrSessionClosed, false)
	}
	for i := len(ix.all.list) - 1; i >= 0; i-- {
		// A many-sessions subscriber stays: a member's session_closed
		// merely passes (multi.go).
		if s := ix.all.list[i]; s.sess == x && s.setOf() == nil {
			ix.unregister(s)
			s.end(ErrSessionClosed, false)
		}
	}
}

// each calls fn for every registered subscriber of h's sessions. The
// structure lock is held exclusively.
func (ix *index) each(h *history, fn func(*Subscription)) {
	h.Each(func(x *session) {
		for _, s := range x.Subs.own {
			fn(s)
		}
	})
	for _, s := range ix.all.list {
		fn(s)
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

// newFan returns a fan with a recycled wake-up list.
func newFan() fan { return fan{wakes: wakeLists.Get().(*[]*Subscription)} }

// fanOut offers r, just published to session x, to every subscriber in x's
// tree whose scope covers x (the "all" subscribers are offered it by the
// publisher's ordering step). The caller holds x's tree lock under the
// structure lock's read side, or the structure lock exclusively.
func (ix *index) fanOut(x *session, r *record, droppable, forced bool, f *fan) {
	ix.offer(&x.Subs.own, nil, nil, r, droppable, forced, f)
	p := x.Parent()
	for a := p; a != nil; a = a.Parent() {
		ix.offer(&a.Subs.desc, nil, nil, r, droppable, forced, f)
	}
	ix.offer(&x.Subs.childSubtree, nil, nil, r, droppable, forced, f)
	if p != nil {
		ix.offer(&p.Subs.childSubtree, x, nil, r, droppable, forced, f)
	}
}

// offer offers r to each subscriber of l except those made on skip. It
// holds each subscriber's mutex only for that subscriber, and only near a
// limit (inside deliver: away from them a delivery takes no lock);
// it never blocks on a consumer. The caller holds the lock that guards l.
// src, r's session, is given for the "all" list: a many-sessions
// subscriber there takes only what its set covers.
func (ix *index) offer(l *subList, skip, src *session, r *record, droppable, forced bool, f *fan) {
	for i := 0; i < len(*l); i++ {
		s := (*l)[i]
		if skip != nil && s.sess == skip {
			continue
		}
		if src != nil && s.setOf() != nil && !s.setOf().covers(src) {
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
			ix.cnt.warnings.Add(1)
			ix.diagnose(diag.Warning, s, r)
		case queue.Dropped, queue.DroppedOld:
			ix.cnt.dropped.Add(1)
			ix.diagnose(diag.Dropped, s, r)
		case queue.Evicted:
			ix.cnt.evicted.Add(1)
			ix.diagnose(diag.Evicted, s, r)
			ix.unregister(s) // its slot is free at once
			s.stopWatch()
			i-- // the last subscriber of l moved into slot i
		}
	}
}

// gap queues a state_resync_required{feed_gap} frame for every live
// subscriber whose scope covers x (the lists fanOut walks): events of x
// with ids up to upTo were lost before this node received them (a
// backend's feed noticed it). A subscriber whose queue already ends with a
// feed_gap frame has that frame extended instead, so a gap in many
// sessions at once is one frame per subscriber. The structure lock is held
// exclusively.
func (ix *index) gap(x *session, upTo uint64) {
	now := ix.now().UnixNano()
	push := func(l subList, skip *session) {
		for _, s := range l {
			if skip != nil && s.sess == skip {
				continue
			}
			named := s.sess.ID
			if s.setOf() != nil {
				if !s.setOf().covers(x) {
					continue
				}
				named = x.ID // a many-sessions subscriber learns whose events are gone
			}
			s.mu.Lock()
			if !s.ended && s.q.PushGap(named, upTo, now) {
				s.wakeLocked()
				ix.cnt.resyncs.Add(1)
			}
			s.mu.Unlock()
		}
	}
	push(x.Subs.own, nil)
	p := x.Parent()
	for a := p; a != nil; a = a.Parent() {
		push(a.Subs.desc, nil)
	}
	push(x.Subs.childSubtree, nil)
	if p != nil {
		push(p.Subs.childSubtree, x)
	}
	push(ix.all.list, nil)
}

// diagnose queues one diagnostic (package internal/diag); flush delivers
// it once every bus lock is released. A bus lock is held: it must stay
// cheap and never log or call the hook.
func (ix *index) diagnose(kind string, s *Subscription, r *record) {
	if ix.report == nil && ix.logger == nil {
		return
	}
	d := diag.Item{Kind: kind, Session: s.sess.ID, Subscriber: s.id, Name: s.name, EventID: r.ID, EventType: r.Type}
	if s.id != 0 {
		s.mu.Lock()
		q := s.figuresLocked()
		s.mu.Unlock()
		d.QueueSize, d.MaxQueued, d.QueuedBytes, d.MaxQueuedBytes = q.QueueSize, q.MaxQueued, q.QueuedBytes, q.MaxQueuedBytes
	}
	ix.diag.Add(d)
}

// flush hands the queued diagnostics to Options.Diagnostics and the
// aggregating logger of Options.Logger, on the caller's goroutine. It must
// be called without any bus lock held (methods defer it before taking one).
func (ix *index) flush() {
	if ix.report == nil && ix.logger == nil {
		return // nothing was queued (diagnose)
	}
	ix.diag.Flush(ix.now, ix.report, ix.logger)
}
