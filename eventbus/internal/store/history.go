package store

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// History is a bus's history in this process: the session tree, each
// session's [Log] and idempotent producers' records, the logs of closed
// sessions kept for their ancestors, what closed or expired sessions took
// with them (tombstones, lost-id marks), and the id sequence. T is what
// the delivery side keeps per session ([Session.Subs]).
//
// Its two locks are the bus's: the structure lock (Lock, RLock), held
// exclusively for every change of the tree's shape, and each tree's lock
// ([Session.TreeLock]), taken under the structure lock's read side for
// what a publish or a subscribe changes in one tree. Each method says
// which it needs; the registry (Lookup, Sessions, SubscriberCounts) needs
// none.
type History[T any] struct {
	mu     *xsync.RBMutex
	closed bool
	cfg    Config

	// hot is the line every publish writes: the sequence and the two
	// counters written right after it.
	hot hotLine

	reg    *xsync.MapOf[string, *Session[T]] // the tree's sessions by id, read without a lock
	treeMu sync.RWMutex                      // the tree's parent links, for readers outside mu
	tree   scope.Tree[*Session[T]]

	allLost uint64 // highest id lost with any closed or expired session
	// lost remembers, for one session TTL, the newest id each closed or
	// expired session took with it; forgotten is the highest such id whose
	// entry has been dropped since. A re-created id is seeded from them.
	lost      map[string]lostMark
	forgotten uint64
	// Closed sessions' logs kept for their open ancestors (retain.go): by
	// id, and in closing order for expiry and the MaxRetained cap.
	keptByID  map[string]*retained[T]
	keptOrder *list.List
	tombs     map[string]int64 // closed session id → Unix ns of closing

	sessions        int // live sessions
	expired         uint64
	retainedDropped uint64
	// maxData is the largest payload appended to any log (read-mostly;
	// atomic, raised by publishers under their tree locks).
	maxData atomic.Int64
}

// hotLine holds what every publish writes, on a cache line of its own:
// seq, the last id given (0 before the first), and two counters.
type hotLine struct {
	_         [64]byte
	seq       atomic.Uint64
	published atomic.Uint64 // records appended (Stats.Published)
	delivered atomic.Uint64 // live deliveries (Stats.Delivered), counted by the caller
	_         [40]byte
}

// Config configures [NewHistory].
type Config struct {
	// Log configures each session's log.
	Log Options
	// TTL is how long, in ns, an idle session lives and a closed id, a
	// lost mark or a tombstone is remembered.
	TTL int64
	// ClosedRetention is how long, in ns, a closed session's log stays
	// kept for its ancestors; MaxRetained caps how many are kept.
	ClosedRetention int64
	MaxRetained     int
}

// lostMark is what one closed or expired session took with it.
type lostMark struct {
	id uint64 // newest id of the session
	at int64  // Unix ns when it went
}

// NewHistory returns an empty History configured by cfg; cfg.Log is
// checked when the first session is added.
func NewHistory[T any](cfg Config) *History[T] {
	return &History[T]{mu: xsync.NewRBMutex(), cfg: cfg, reg: xsync.NewMapOf[string, *Session[T]](), tombs: make(map[string]int64)}
}

// Lock takes the structure lock exclusively.
func (h *History[T]) Lock() { h.mu.Lock() }

// TryLock takes the structure lock exclusively if it is free.
func (h *History[T]) TryLock() bool { return h.mu.TryLock() }

// Unlock releases the structure lock taken with Lock.
func (h *History[T]) Unlock() { h.mu.Unlock() }

// RLock takes the structure lock's read side; give the token to RUnlock.
func (h *History[T]) RLock() *xsync.RToken { return h.mu.RLock() }

// RUnlock releases the read side taken with RLock.
func (h *History[T]) RUnlock(t *xsync.RToken) { h.mu.RUnlock(t) }

// Closed reports whether Close was called; the structure lock (either
// side) is held.
func (h *History[T]) Closed() bool { return h.closed }

// Close marks the history closed; the structure lock is held exclusively.
func (h *History[T]) Close() { h.closed = true }

// NextID takes the next id of the sequence. The caller holds the lock of
// the tree the id's record is appended to (and the delivery side's
// ordering step, if any), or the structure lock exclusively.
func (h *History[T]) NextID() uint64 { return h.hot.seq.Add(1) }

// LastID returns the last id taken (0 before the first); no lock.
func (h *History[T]) LastID() uint64 { return h.hot.seq.Load() }

// SetLastID makes id the last id taken: a backend's feed, which brings
// ids from elsewhere. The structure lock is held exclusively.
func (h *History[T]) SetLastID(id uint64) { h.hot.seq.Store(id) }

// CountDelivered adds n live deliveries to Stats.Delivered; no lock.
func (h *History[T]) CountDelivered(n int64) { h.hot.delivered.Add(uint64(n)) }

// MaxData returns the largest payload, in bytes, ever appended; no lock.
func (h *History[T]) MaxData() int64 { return h.maxData.Load() }

// Lookup returns session id if it exists. It takes no lock: a lookup
// racing a structural change may or may not see it.
func (h *History[T]) Lookup(id string) (*Session[T], bool) { return h.reg.Load(id) }

// Get returns session id, nil when it does not exist. The structure lock
// (either side) is held.
func (h *History[T]) Get(id string) *Session[T] {
	if n := h.tree.Get(id); n != nil {
		return n.Value
	}
	return nil
}

// Each calls fn for every session. The structure lock is held.
func (h *History[T]) Each(fn func(*Session[T])) {
	h.tree.Each(func(n *scope.Node[*Session[T]]) { fn(n.Value) })
}

// Tombstoned reports whether id was closed (and neither reopened nor
// forgotten since). The structure lock (either side) is held.
func (h *History[T]) Tombstoned(id string) bool {
	_, ok := h.tombs[id]
	return ok
}

// Tombstone remembers id as closed at Unix ns at, for the TTL; Untombstone
// forgets it (a reopened id). The structure lock is held exclusively.
func (h *History[T]) Tombstone(id string, at int64) { h.tombs[id] = at }

// Untombstone forgets that id was closed.
func (h *History[T]) Untombstone(id string) { delete(h.tombs, id) }

// Add creates session id under parent ("" for a root), its log empty, or
// holding what the id left behind when it was closed and its log is still
// kept; its log reports as evicted what an earlier incarnation of the id
// lost. now (Unix ns) is its last activity. Errors: the log options', and
// scope.ErrUnknownParent or scope.ErrCycle. The structure lock is held
// exclusively.
func (h *History[T]) Add(id, parent string, now int64) (*Session[T], error) {
	log, err := New(h.cfg.Log)
	if err != nil {
		return nil, err
	}
	// The id may have lived before (expired, or closed and its tombstone
	// forgotten): a resume from before what it lost then gets ring_evicted
	// instead of a silent gap. Within one TTL we know exactly what the id
	// lost; after that, conservatively, anything forgotten since.
	if m, ok := h.lost[id]; ok {
		log.MarkEvicted(m.id)
	} else {
		log.MarkEvicted(h.forgotten)
	}
	x := &Session[T]{ID: id, log: log, keepEnded: h.cfg.Log.Records}
	x.active.Store(now)
	h.treeMu.Lock()
	n, err := h.tree.Add(id, parent, x)
	if err == nil {
		x.node = n
	}
	h.treeMu.Unlock()
	if err != nil {
		return nil, err
	}
	h.reg.Store(id, x)
	h.sessions++
	h.adopt(x)
	return x, nil
}

// Discard removes x, just added, as if it never existed (nothing else may
// have used it). The structure lock is held exclusively.
func (h *History[T]) Discard(x *Session[T]) {
	h.unlink(x)
	h.sessions--
}

// Attach gives the root x the parent: what x's subtree lost with closed
// or expired sessions is lost to the new ancestors' descendants scope
// too. Errors: scope.ErrUnknownParent, scope.ErrCycle. The structure lock
// is held exclusively.
func (h *History[T]) Attach(x *Session[T], parent string) error {
	h.treeMu.Lock()
	err := h.tree.SetParent(x.ID, parent)
	h.treeMu.Unlock()
	if err != nil {
		return err
	}
	lost := x.descLost
	for a := x.Parent(); a != nil && lost > 0; a = a.Parent() {
		a.descLost = max(a.descLost, lost)
	}
	return nil
}

// Remove takes the closed or expired x out of the tree at Unix ns now and
// returns its parent (nil for a root) and its children, which move up to
// the parent (roots when x was one). x's log stays readable for the
// descendants and all scopes of its open ancestors (retain.go); a root's
// goes, with all it holds. What goes is remembered as lost, so that a
// resume that needed it is told. The structure lock is held exclusively.
func (h *History[T]) Remove(x *Session[T], now int64) (p *Session[T], kids []*Session[T]) {
	p = x.Parent()
	x.node.Children(func(c *scope.Node[*Session[T]]) bool { kids = append(kids, c.Value); return true })
	if p != nil {
		h.keep(x, p, now)
	} else {
		h.dropHeld(x)
		h.allLost = max(h.allLost, x.lastID)
	}
	if lost := x.lastID; lost > 0 {
		if p != nil {
			p.childLost = max(p.childLost, lost)
		}
		for _, c := range kids {
			c.subtreeLost = max(c.subtreeLost, lost)
		}
		if h.lost == nil {
			h.lost = make(map[string]lostMark)
		}
		h.lost[x.ID] = lostMark{id: lost, at: now}
	}
	h.unlink(x)
	if p != nil {
		h.treeMu.Lock()
		for _, c := range kids {
			_ = h.tree.SetParent(c.ID, p.ID) // p is an ancestor of c's old place: no cycle
		}
		h.treeMu.Unlock()
	}
	if p == nil {
		x.log.Clear()
	}
	x.log = nil
	h.sessions--
	return p, kids
}

// unlink removes x from the registry and the tree (its children become
// roots).
func (h *History[T]) unlink(x *Session[T]) {
	h.reg.Delete(x.ID)
	h.treeMu.Lock()
	h.tree.Remove(x.ID, false)
	h.treeMu.Unlock()
}

// Append stores r, whose id is the last one taken, in x's log. The caller
// holds x's tree lock under the structure lock's read side, or the
// structure lock exclusively.
func (h *History[T]) Append(x *Session[T], r *queue.Record) {
	x.published = true
	x.lastID = r.ID
	x.Touch(r.Nanos)
	x.log.Append(r)
	if n := int64(len(r.Data)); n > h.maxData.Load() {
		h.raiseMaxData(n)
	}
	x.infoLast.Store(r.ID)
	if n := int32(x.log.Len()); n != x.buffered.Load() {
		x.buffered.Store(n)
	}
	h.hot.published.Add(1)
}

// raiseMaxData raises maxData to n unless it already holds at least n.
func (h *History[T]) raiseMaxData(n int64) {
	for {
		cur := h.maxData.Load()
		if n <= cur || h.maxData.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Clear empties x's log; the cleared ids count as evicted. The caller
// holds x's tree lock under the structure lock's read side.
func (h *History[T]) Clear(x *Session[T]) {
	x.log.Clear()
	x.buffered.Store(0)
}

// ScopeLogs appends to dst the logs a subscriber of x with scope k replays
// from, and returns them with the highest id lost with sessions that were
// in that scope and have been closed or expired. The caller holds x's
// tree lock under the structure lock's read side (every scope but all), or
// the structure lock exclusively.
func (h *History[T]) ScopeLogs(x *Session[T], k scope.Kind, dst []Log[*queue.Record]) ([]Log[*queue.Record], uint64) {
	switch k {
	case scope.Descendants:
		x.node.Walk(func(n *scope.Node[*Session[T]]) bool {
			dst = n.Value.keptLogs(append(dst, n.Value.log))
			return true
		})
		return dst, x.descLost
	case scope.Subtree:
		dst = append(dst, x.log)
		lost := x.subtreeLost
		if p := x.Parent(); p != nil {
			dst = append(dst, p.log)
			lost = max(lost, p.childLost)
			p.node.Children(func(c *scope.Node[*Session[T]]) bool {
				if c.Value != x {
					dst = append(dst, c.Value.log)
				}
				return true
			})
		}
		return dst, lost
	case scope.All:
		h.tree.Each(func(n *scope.Node[*Session[T]]) { dst = n.Value.keptLogs(append(dst, n.Value.log)) })
		return dst, h.allLost
	}
	return append(dst, x.log), 0
}

// Expire removes every session idle — no subscriber, no child, no
// active turn, no activity — for at least the TTL at Unix ns now, and forgets closed ids,
// lost marks and kept logs older than theirs. It returns the sessions it
// removed. The structure lock is held exclusively.
func (h *History[T]) Expire(now int64) []*Session[T] {
	var idle []*Session[T]
	h.tree.Each(func(n *scope.Node[*Session[T]]) {
		x := n.Value
		if x.nsubs.Load() == 0 && n.NumChildren() == 0 && now-x.active.Load() >= h.cfg.TTL && x.ActiveTurn() == nil {
			idle = append(idle, x)
		}
	})
	for _, x := range idle {
		h.Remove(x, now)
		h.expired++
	}
	h.expireKept(now)
	for id, m := range h.lost {
		if now-m.at >= h.cfg.TTL {
			h.forgotten = max(h.forgotten, m.id)
			delete(h.lost, id)
		}
	}
	for id, at := range h.tombs {
		if now-at >= h.cfg.TTL {
			delete(h.tombs, id)
		}
	}
	return idle
}

// Stats fills in st what the history counts: Sessions, Expired, Retained,
// RetainedDropped (under the structure lock, either side, which the
// caller holds), Published and Delivered (atomics).
func (h *History[T]) Stats(st *observe.Stats) {
	st.Sessions = h.sessions
	st.Expired = h.expired
	st.Retained = len(h.keptByID)
	st.RetainedDropped = h.retainedDropped
	st.Published = h.hot.published.Load()
	st.Delivered = h.hot.delivered.Load()
}

// Sessions lists every live session, in no particular order, from the
// registry and each session's atomics; it takes only the lock of the
// tree's parent links, which structural changes hold briefly. A session
// created or closed meanwhile may or may not be listed.
func (h *History[T]) Sessions() []observe.SessionInfo {
	out := make([]observe.SessionInfo, 0, h.reg.Size())
	h.treeMu.RLock()
	defer h.treeMu.RUnlock()
	h.reg.Range(func(_ string, x *Session[T]) bool {
		out = append(out, x.info())
		return true
	})
	return out
}

// Info returns what Sessions lists for session id, in O(1), and false
// when it does not exist; locks as Sessions.
func (h *History[T]) Info(id string) (observe.SessionInfo, bool) {
	x, ok := h.reg.Load(id)
	if !ok {
		return observe.SessionInfo{}, false
	}
	h.treeMu.RLock()
	defer h.treeMu.RUnlock()
	return x.info(), true
}

// info is x's line of a listing; the caller holds treeMu's read side.
func (x *Session[T]) info() observe.SessionInfo {
	info := observe.SessionInfo{ID: x.ID, Subscribers: int(x.nsubs.Load()),
		Buffered: int(x.buffered.Load()), LastEventID: x.infoLast.Load()}
	if p := x.node.Parent(); p != nil {
		info.Parent = p.ID
	}
	return info
}

// SubscriberCounts returns the number of subscribers made on each session
// that has any, from the registry, without a lock.
func (h *History[T]) SubscriberCounts() map[string]int {
	out := make(map[string]int)
	h.reg.Range(func(id string, x *Session[T]) bool {
		if n := x.nsubs.Load(); n > 0 {
			out[id] = int(n)
		}
		return true
	})
	return out
}
