package eventbus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/scope"
)

// session is the bus's state for one session: its replay buffer, its place
// in the tree and its subscriber lists. Its place in the tree (node's links,
// kept, the *Lost marks) changes only under the structure lock (Bus.mu)
// held exclusively; everything a publish or a tree-scoped subscribe writes
// (ring, own, desc, childSubtree, published, lastID) is guarded by its
// tree's lock under Bus.mu's read side, or by Bus.mu held exclusively.
type session struct {
	id string
	// tmu is the tree lock when this session is a root: the lock of the
	// whole tree below it (see treeLock). Unused while it has a parent.
	tmu sync.Mutex

	node *scope.Node[*session]
	ring store.Log[*record]

	subs subs        // its subscriber lists (the delivery index, index.go)
	info sessionInfo // what listings read without the bus lock; info.nsubs counts its subscribers, "all" included (registry.go)

	published bool   // a child may get a parent only before it publishes
	lastID    uint64 // id of the newest event published here
	// active is the Unix ns of the last publish, subscribe or unsubscribe;
	// atomic, since an "all" subscriber made here may be unsubscribed
	// (evicted) by a publisher of another tree.
	active atomic.Int64

	// Highest ids lost with a closed or expired session that was in this
	// session's descendants (descLost), its subtree as parent-or-sibling
	// (subtreeLost), or among its children (childLost); a resume from
	// before them is told with ring_evicted.
	descLost, subtreeLost, childLost uint64

	// kept are closed sessions' replay buffers held for this session's
	// descendants and all scopes (and its ancestors'), see retain.go.
	kept []*retained

	// producers is the record of the idempotent producers that published
	// here (producer.go), the maxProducers most recently used; under the
	// tree lock.
	producers *producerLRU[producer.State]
	// remoteProducers is, over a backend, this node's copy of the
	// backend's records of the producers that publish here (producer.go),
	// the maxProducers most recently used; under Bus.mu held exclusively.
	remoteProducers *producerLRU[remoteProducer]
}

func (x *session) parent() *session {
	if p := x.node.Parent(); p != nil {
		return p.Value
	}
	return nil
}

// treeLock returns the lock of x's session tree: its root's tmu. The
// caller holds Bus.mu (either side), which keeps the tree's shape, and so
// the root, fixed until it is released. A tree that merges into another
// (a root attached late) or splits (a close whose children become roots)
// does so under Bus.mu held exclusively, when no tree lock is held.
func (x *session) treeLock() *sync.Mutex {
	r := x.node
	for p := r.Parent(); p != nil; p = p.Parent() {
		r = p
	}
	return &r.Value.tmu
}

// touch moves x.active forward to now (never back).
func (x *session) touch(now int64) {
	for {
		old := x.active.Load()
		if now <= old || x.active.CompareAndSwap(old, now) {
			return
		}
	}
}

// sessionLocked returns the session, creating it as a root when create is
// set. b.mu must be held exclusively.
func (b *Bus) sessionLocked(id string, create bool) (*session, error) {
	if n := b.mem.tree.Get(id); n != nil {
		return n.Value, nil
	}
	if _, ok := b.mem.tombs[id]; ok {
		return nil, fmt.Errorf("%w: %q", ErrSessionClosed, id)
	}
	if !create {
		return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	if b.cfg.SessionController != nil {
		return b.addAskedLocked(id, nil)
	}
	return b.addLocked(id, "")
}

// maxAskDepth bounds how many ancestors one [Options.SessionController] lookup may
// create.
const maxAskDepth = 64

// addAskedLocked creates the unknown session id under the parent the
// session controller names, creating that parent first (asking again) when
// the bus does not know it either. asking holds the ids being created
// further down, so a controller that answers with a cycle ends it: the
// session that would close it becomes a root. A controller that panics
// fails the whole creation with the error askParent makes of it.
func (b *Bus) addAskedLocked(id string, asking []string) (*session, error) {
	parent, err := b.askParent(id)
	if err != nil {
		return nil, err
	}
	switch {
	case parent == "" || parent == id || checkName("parent session id", parent) != nil,
		len(asking) >= maxAskDepth, slices.Contains(asking, parent):
		parent = ""
	default:
		if _, closed := b.mem.tombs[parent]; closed {
			parent = ""
		} else if b.mem.tree.Get(parent) == nil {
			if _, err := b.addAskedLocked(parent, append(asking, id)); errors.Is(err, errControllerPanicked) {
				return nil, err
			} else if err != nil {
				parent = ""
			}
		}
	}
	return b.addLocked(id, parent)
}

// errControllerPanicked marks the error of a session controller that
// panicked (wrapped with ErrInvalid).
var errControllerPanicked = errors.New("session controller panicked")

// askParent asks the session controller for id's parent. The controller
// runs with the structure lock held exclusively: a panic in it must not
// leave the lock held (every later call of the bus would wait forever), so
// it is recovered and returned as an ErrInvalid error naming it.
func (b *Bus) askParent(id string) (parent string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w for session %q: %v", ErrInvalid, errControllerPanicked, id, p)
		}
	}()
	return b.cfg.SessionController(id), nil
}

func (b *Bus) addLocked(id, parent string) (*session, error) {
	ring, err := b.newLog()
	if err != nil {
		return nil, err
	}
	// The id may have lived before (expired, or closed and its tombstone
	// forgotten): a resume from before what it lost then gets ring_evicted
	// instead of a silent gap. Within one TTL we know exactly what the id
	// lost; after that, conservatively, anything forgotten since.
	if m, ok := b.mem.lost[id]; ok {
		ring.MarkEvicted(m.id)
	} else {
		ring.MarkEvicted(b.mem.forgotten)
	}
	x := &session{id: id, ring: ring}
	x.active.Store(b.nowNanos())
	if err := b.treeAddLocked(x, parent); err != nil {
		return nil, err
	}
	b.mem.stats.Sessions++
	b.adoptLocked(x)
	return x, nil
}

// CreateSession creates session id under parent ("" for a root), or
// brings it into the tree:
//
//   - an unknown id is created under parent;
//   - a closed id is reopened (AgentPool's closed sessions come back with
//     ACP session/resume or session/load, same id): a new incarnation under
//     the same bus sequence, so its ids go on rising. It takes back its old
//     replay buffer (session_closed included) while that is still kept for
//     its tree (Options.ClosedRetention), so a resume from before the close
//     loses nothing; otherwise it starts empty and a subscriber that
//     resumes with a cursor from before the close is told what it cannot
//     get back with state_resync_required{ring_evicted} — never silence;
//   - an existing root is attached to parent, at any time, even after it
//     published (agent pools learn the link late): from then on its events
//     reach parent's descendants, subtree and ancestors' subscribers, and a
//     descendants subscribe or resume on an ancestor replays its history
//     merged by id;
//   - calling it again with the same parent is a no-op.
//
// Errors (each naming the ids): ErrInvalid for a bad id, or when id already
// has another parent (a session is attached once; it is not moved between
// parents); scope.ErrUnknownParent for an unknown parent; scope.ErrCycle
// when parent is id or lies below it; ErrSessionClosed when parent was
// closed (reopen it first); ErrClosed after Close. Over a backend (package
// NewWithBackend) the
// creation, reopening or attachment is also appended to the backend so
// every node learns it, and the backend's error is returned.
func (b *Bus) CreateSession(id, parent string) error {
	if err := checkName("session id", id); err != nil {
		return err
	}
	if parent != "" {
		if err := checkName("parent session id", parent); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if _, ok := b.mem.tombs[parent]; ok && parent != "" {
		return fmt.Errorf("%w: parent %q", ErrSessionClosed, parent)
	}
	n := b.mem.tree.Get(id)
	if n == nil {
		if parent == id {
			return fmt.Errorf("%w: %q under itself", scope.ErrCycle, id)
		}
		_, reopened := b.mem.tombs[id]
		x, err := b.addLocked(id, parent)
		if err != nil {
			return err
		}
		// A reopened id is a new incarnation: it takes back its buffer
		// while that is still kept (addLocked, adoptLocked); otherwise
		// its buffer starts empty, marked evicted up to what the closed
		// one held, so an old cursor gets ring_evicted.
		delete(b.mem.tombs, id)
		return b.w.created(b, x, true, reopened)
	}
	x := n.Value
	old := x.parent()
	if old != nil && old.id == parent || old == nil && parent == "" {
		return nil
	}
	if old != nil {
		return invalidf("session %q already has parent %q, cannot move it under %q", id, old.id, parent)
	}
	if err := b.treeSetParentLocked(id, parent); err != nil {
		return err
	}
	b.attachedLocked(x)
	return b.w.created(b, x, false, false)
}

// attachedLocked finishes attaching the root x to its new parent: its
// subtree subscribers move to the parent's list, and what x's subtree lost
// with closed or expired sessions is now lost to the new ancestors'
// descendants scope too.
func (b *Bus) attachedLocked(x *session) {
	p := x.parent()
	b.idx.reparent(x, nil, p)
	lost := x.descLost
	for a := p; a != nil && lost > 0; a = a.parent() {
		a.descLost = max(a.descLost, lost)
	}
}

// SessionClosed reports whether session id was closed and has not been
// reopened since. A closed id is remembered for the session TTL; after that
// it is simply unknown (SessionClosed and SessionExists both false).
//
// It takes the structure lock's read side: it waits only for a structural
// change, never for a publish.
func (b *Bus) SessionClosed(id string) bool {
	tok := b.mu.RLock()
	defer b.mu.RUnlock(tok)
	_, ok := b.mem.tombs[id]
	return ok
}

// ClearReplayBuffer empties session id's replay buffer, as AgentPool's
// clear_replay_buffer (which agent servers call at the start of every
// turn). The cleared ids count as evicted: a later resume from before them
// gets ring_evicted. Like AgentPool's, it is a no-op (nil) for an id the bus
// does not know or that was closed. It holds the lock of id's session tree
// (under the structure lock's read side), as a publish there does: other
// trees' publishers do not wait for it. Errors: ErrClosed after Close.
func (b *Bus) ClearReplayBuffer(id string) error {
	tok := b.mu.RLock()
	defer b.mu.RUnlock(tok)
	if b.closed {
		return ErrClosed
	}
	if x, ok := b.mem.sessions.Load(id); ok {
		tl := x.treeLock()
		tl.Lock()
		x.ring.Clear()
		x.info.buffered.Store(0)
		tl.Unlock()
	}
	return nil
}

// CloseSession closes session id (AgentPool's close_session): it publishes a
// session_closed event (a real event with an id) that every subscriber in
// scope receives even when its queue is full, ends the session's own
// subscribers once they have drained (their Err is ErrSessionClosed) and
// removes it from the tree. Its replay buffer stays readable for the
// descendants and all scopes of its open ancestors, so that a client of the
// run that resumes after the sub-agent finished loses nothing, until the
// tree's root closes, Options.ClosedRetention passes or Options.MaxRetained
// buffers are kept (a root's buffer goes at once). Its children move up to
// its parent (roots when it was a root), so the tree stays connected: a
// descendants subscriber of an ancestor keeps hearing them, as in
// AgentPool, whose tree keeps the closed link. Subscribers of other
// sessions that heard it (descendants, subtree, all) receive session_closed
// and go on.
//
// Later publishes and subscribes to id fail with ErrSessionClosed for the
// session TTL, unless [Bus.CreateSession] reopens it, so that a late
// publish cannot resurrect a closed session unnoticed (docs/python-parity.md
// compares AgentPool).
//
// Closing a closed or unknown session is a no-op (nil), as in AgentPool.
// Errors: ErrClosed after Close; over a backend, the backend's error.
func (b *Bus) CloseSession(id string) error { return b.closeSession(id, false) }

// CloseSessionTree closes session id and every session below it, however
// deep, each as [Bus.CloseSession] does: children before their parent (so
// each child's session_closed precedes its parent's), siblings in id order.
// On a closed or unknown id it is a no-op (nil).
func (b *Bus) CloseSessionTree(id string) error { return b.closeSession(id, true) }

func (b *Bus) closeSession(id string, cascade bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	n := b.mem.tree.Get(id)
	if n == nil {
		return nil
	}
	if cascade {
		return b.w.close(b, closeOrder(n.Value))
	}
	return b.w.close(b, []*session{n.Value})
}

// closeOrder returns x's subtree in the order CloseSessionTree closes it:
// every session after all of its descendants, siblings in id order. It is
// iterative, so a tree of any depth is fine.
func closeOrder(x *session) []*session {
	// A pre-order walk with children visited in reverse id order, reversed,
	// puts children before parents and siblings in id order.
	var out []*session
	stack := []*session{x}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, y)
		start := len(stack)
		y.node.Children(func(c *scope.Node[*session]) bool { stack = append(stack, c.Value); return true })
		slices.SortFunc(stack[start:], func(a, b *session) int { return strings.Compare(a.id, b.id) })
	}
	slices.Reverse(out)
	return out
}

// closeLocked closes x. With announce it publishes session_closed; expiry
// does not. x's children move up to x's parent.
func (b *Bus) closeLocked(x *session, announce bool) {
	now := b.nowNanos()
	if announce {
		r := &record{Session: x.id, Type: frame.TypeSessionClosed, Nanos: now,
			Data: mustJSON(frame.SessionClosedData{Session: x.id, Reason: "closed"})}
		b.appendLocked(x, r, true, &fan{}) // wakes at once
		b.mem.tombs[x.id] = now
	}
	p := x.parent()
	var kids []*session
	x.node.Children(func(c *scope.Node[*session]) bool { kids = append(kids, c.Value); return true })
	// x's buffer stays readable for the descendants and all scopes of its
	// open ancestors (retain.go); a root's goes, with all it holds. What
	// goes, and what the subtree scope no longer reads, is remembered so a
	// resume that needed it is told (ring_evicted) instead of silently
	// missing it.
	if p != nil {
		b.keepLocked(x, p, now)
	} else {
		b.dropHeldLocked(x)
		b.mem.allLost = max(b.mem.allLost, x.lastID)
	}
	if lost := x.lastID; lost > 0 {
		if p != nil {
			p.childLost = max(p.childLost, lost)
		}
		for _, c := range kids {
			c.subtreeLost = max(c.subtreeLost, lost)
		}
		if b.mem.lost == nil {
			b.mem.lost = make(map[string]lostMark)
		}
		b.mem.lost[x.id] = lostMark{id: lost, at: now}
	}
	// End the session's own subscribers after they drain.
	b.idx.endSession(x)
	// The children move up to x's parent, and their subtree subscribers
	// (kept in x.childSubtree) to the parent's list.
	b.treeRemoveLocked(x)
	for _, c := range kids {
		if p != nil {
			_ = b.treeSetParentLocked(c.id, p.id) // p is an ancestor of c's old place: no cycle
		}
		b.idx.reparent(c, x, p)
	}
	x.subs.childSubtree = nil
	if p == nil {
		x.ring.Clear()
	}
	x.ring = nil
	b.mem.stats.Sessions--
}

// lostMark is what one closed or expired session took with it.
type lostMark struct {
	id uint64 // newest id of the session
	at int64  // Unix ns when it went
}
