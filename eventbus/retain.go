package eventbus

import (
	"container/list"

	"github.com/replaybus/replaybus/eventbus/internal/store"
)

// Retention of closed sessions' history inside a live tree.
//
// A sub-agent's session is usually closed when the sub-agent finishes,
// often while a client of the whole run (a descendants subscriber of an
// ancestor) is reconnecting. If its replay buffer went with it, that
// client's resume would lose the sub-agent's last events (ring_evicted).
// So when a session that has a parent closes, its buffer is kept — not as a
// session (it takes no publish and no subscriber) but as history held by
// the nearest open ancestor, read by the descendants and all scopes of that
// ancestor and of every ancestor above it. It goes:
//
//   - with the tree: when the holder closes, what it holds moves up to its
//     parent; when a root closes, everything it holds is dropped (no open
//     ancestor is left to resume into);
//   - after Options.ClosedRetention (10 min by default), swept by ExpireIdle;
//   - when more than Options.MaxRetained buffers are held, oldest first;
//   - into the session again when its id is reopened (CreateSession), so a
//     resume of the reopened session loses nothing either.
//
// A buffer dropped while some scope could still read it counts as lost for
// that scope (descLost of the holder and its ancestors, allLost), so a
// resume that needed it gets ring_evicted. The subtree scope does not read
// retained buffers: a closed sibling or parent is announced as lost at once,
// as before. Memory: at most MaxRetained × ReplayBufferSize events beyond
// the live sessions' buffers (docs/operations.md).

// retained is one closed session's replay buffer, kept for the scopes of
// its open ancestors.
type retained struct {
	id     string
	ring   store.Log[*record]
	lastID uint64   // the newest id in it (its session_closed)
	at     int64    // Unix ns when the session closed
	holder *session // the open session it is kept under
	pos    int      // index in holder.kept
	elem   *list.Element
}

// keepLocked hands x's replay buffer and everything x holds to x's parent
// p, as x closes. b.mu must be held exclusively.
func (b *Bus) keepLocked(x, p *session, now int64) {
	for _, r := range x.kept {
		r.holder, r.pos = p, len(p.kept)
		p.kept = append(p.kept, r)
	}
	x.kept = nil
	if x.lastID == 0 {
		return // nothing was ever published: nothing to keep
	}
	if old := b.mem.keptByID[x.id]; old != nil {
		// The id had been closed, reopened without adopting (its buffer
		// was still kept elsewhere) and closed again: the older one goes.
		b.dropKeptLocked(old)
	}
	r := &retained{id: x.id, ring: x.ring, lastID: x.lastID, at: now, holder: p, pos: len(p.kept)}
	p.kept = append(p.kept, r)
	if b.mem.keptByID == nil {
		b.mem.keptByID = make(map[string]*retained)
		b.mem.keptOrder = list.New()
	}
	b.mem.keptByID[x.id] = r
	r.elem = b.mem.keptOrder.PushBack(r)
	for b.mem.keptOrder.Len() > b.cfg.MaxRetained {
		b.dropKeptLocked(b.mem.keptOrder.Front().Value.(*retained))
	}
}

// unkeepLocked takes r out of every index without marking anything lost.
func (b *Bus) unkeepLocked(r *retained) {
	h := r.holder
	last := len(h.kept) - 1
	h.kept[r.pos] = h.kept[last]
	h.kept[r.pos].pos = r.pos
	h.kept[last] = nil
	h.kept = h.kept[:last]
	delete(b.mem.keptByID, r.id)
	b.mem.keptOrder.Remove(r.elem)
}

// dropKeptLocked drops a kept buffer: a resume of the descendants scope of
// its holder or an ancestor, or of the all scope, that needed it is told.
func (b *Bus) dropKeptLocked(r *retained) {
	b.unkeepLocked(r)
	for a := r.holder; a != nil; a = a.parent() {
		a.descLost = max(a.descLost, r.lastID)
	}
	b.mem.allLost = max(b.mem.allLost, r.lastID)
	r.ring.Clear()
	b.mem.stats.RetainedDropped++
}

// dropHeldLocked drops everything x holds, as the root x closes. Nobody can
// resume x's descendants scope any more; the all scope is told.
func (b *Bus) dropHeldLocked(x *session) {
	for len(x.kept) > 0 {
		b.dropKeptLocked(x.kept[len(x.kept)-1])
	}
}

// adoptLocked gives the reopened session x the buffer its id left behind,
// if it is still kept, so that a resume of x from before its close loses
// nothing. Ancestors that read it through the old holder but are not
// ancestors of x's new place lose it.
func (b *Bus) adoptLocked(x *session) {
	r := b.mem.keptByID[x.id]
	if r == nil {
		return
	}
	b.unkeepLocked(r)
	for a := r.holder; a != nil; a = a.parent() {
		if !x.node.IsDescendantOf(a.node) {
			a.descLost = max(a.descLost, r.lastID)
		}
	}
	x.ring, x.lastID = r.ring, r.lastID
	x.info.lastID.Store(r.lastID)
	x.info.buffered.Store(int32(r.ring.Len()))
}

// expireKeptLocked drops kept buffers older than ClosedRetention.
func (b *Bus) expireKeptLocked(now int64) {
	if b.mem.keptOrder == nil {
		return
	}
	for e := b.mem.keptOrder.Front(); e != nil; e = b.mem.keptOrder.Front() {
		r := e.Value.(*retained)
		if now-r.at < int64(b.cfg.ClosedRetention) {
			return
		}
		b.dropKeptLocked(r)
	}
}

// keptRings appends the buffers x holds to rings.
func (x *session) keptRings(rings []store.Log[*record]) []store.Log[*record] {
	for _, r := range x.kept {
		rings = append(rings, r.ring)
	}
	return rings
}
