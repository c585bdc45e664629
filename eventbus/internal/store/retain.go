package store

import (
	"container/list"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// Retention of closed sessions' logs inside a live tree.
//
// A sub-agent's session is usually closed when the sub-agent finishes,
// often while a client of the whole run (a descendants subscriber of an
// ancestor) is reconnecting. If its log went with it, that
// client's resume would lose the sub-agent's last events (ring_evicted).
// So when a session that has a parent closes, its log is kept — not as a
// session (it takes no publish and no subscriber) but as history held by
// the nearest open ancestor, read by the descendants and all scopes of that
// ancestor and of every ancestor above it. It goes:
//
//   - with the tree: when the holder closes, what it holds moves up to its
//     parent; when a root closes, everything it holds is dropped (no open
//     ancestor is left to resume into);
//   - after Config.ClosedRetention, swept by Expire;
//   - when more than Config.MaxRetained logs are held, oldest first;
//   - into the session again when its id is added again (a reopened id),
//     so a resume of the reopened session loses nothing either.
//
// A log dropped while some scope could still read it counts as lost for
// that scope (descLost of the holder and its ancestors, allLost), so a
// resume that needed it gets ring_evicted. The subtree scope does not read
// retained logs: a closed sibling or parent is announced as lost at once,
// as before. Memory: at most MaxRetained logs beyond the live sessions'.

// retained is one closed session's log, kept for the scopes of its open
// ancestors.
type retained[T any] struct {
	id     string
	log    Log[*queue.Record]
	lastID uint64      // the newest id in it (its session_closed)
	at     int64       // Unix ns when the session closed
	holder *Session[T] // the open session it is kept under
	pos    int         // index in holder.kept
	elem   *list.Element
}

// keep hands x's log and everything x holds to x's parent p, as x
// closes.
func (h *History[T]) keep(x, p *Session[T], now int64) {
	for _, r := range x.kept {
		r.holder, r.pos = p, len(p.kept)
		p.kept = append(p.kept, r)
	}
	x.kept = nil
	if x.lastID == 0 {
		return // nothing was ever published: nothing to keep
	}
	if old := h.keptByID[x.ID]; old != nil {
		// The id had been closed, reopened without adopting (its log
		// was still kept elsewhere) and closed again: the older one goes.
		h.dropKept(old)
	}
	r := &retained[T]{id: x.ID, log: x.log, lastID: x.lastID, at: now, holder: p, pos: len(p.kept)}
	p.kept = append(p.kept, r)
	if h.keptByID == nil {
		h.keptByID = make(map[string]*retained[T])
		h.keptOrder = list.New()
	}
	h.keptByID[x.ID] = r
	r.elem = h.keptOrder.PushBack(r)
	for h.keptOrder.Len() > h.cfg.MaxRetained {
		h.dropKept(h.keptOrder.Front().Value.(*retained[T]))
	}
}

// unkeep takes r out of every index without marking anything lost.
func (h *History[T]) unkeep(r *retained[T]) {
	x := r.holder
	last := len(x.kept) - 1
	x.kept[r.pos] = x.kept[last]
	x.kept[r.pos].pos = r.pos
	x.kept[last] = nil
	x.kept = x.kept[:last]
	delete(h.keptByID, r.id)
	h.keptOrder.Remove(r.elem)
}

// dropKept drops a kept log: a resume of the descendants scope of its
// holder or an ancestor, or of the all scope, that needed it is told.
func (h *History[T]) dropKept(r *retained[T]) {
	h.unkeep(r)
	for a := r.holder; a != nil; a = a.Parent() {
		a.descLost = max(a.descLost, r.lastID)
	}
	h.allLost = max(h.allLost, r.lastID)
	r.log.Clear()
	h.retainedDropped++
}

// dropHeld drops everything x holds, as the root x closes. Nobody can
// resume x's descendants scope any more; the all scope is told.
func (h *History[T]) dropHeld(x *Session[T]) {
	for len(x.kept) > 0 {
		h.dropKept(x.kept[len(x.kept)-1])
	}
}

// adopt gives the reopened session x the log its id left behind, if it
// is still kept, so that a resume of x from before its close loses
// nothing. Ancestors that read it through the old holder but are not
// ancestors of x's new place lose it.
func (h *History[T]) adopt(x *Session[T]) {
	r := h.keptByID[x.ID]
	if r == nil {
		return
	}
	h.unkeep(r)
	for a := r.holder; a != nil; a = a.Parent() {
		if !x.node.IsDescendantOf(a.node) {
			a.descLost = max(a.descLost, r.lastID)
		}
	}
	x.log, x.lastID = r.log, r.lastID
	x.infoLast.Store(r.lastID)
	x.buffered.Store(int32(r.log.Len()))
}

// expireKept drops kept logs older than ClosedRetention.
func (h *History[T]) expireKept(now int64) {
	if h.keptOrder == nil {
		return
	}
	for e := h.keptOrder.Front(); e != nil; e = h.keptOrder.Front() {
		r := e.Value.(*retained[T])
		if now-r.at < h.cfg.ClosedRetention {
			return
		}
		h.dropKept(r)
	}
}

// keptLogs appends the logs x holds to logs.
func (x *Session[T]) keptLogs(logs []Log[*queue.Record]) []Log[*queue.Record] {
	for _, r := range x.kept {
		logs = append(logs, r.log)
	}
	return logs
}
