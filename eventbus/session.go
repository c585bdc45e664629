package eventbus

import (
	"sync"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/internal/store"
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

	own          subList     // subscribers made on this session (all scopes but "all")
	desc         subList     // those of own with scope descendants
	childSubtree subList     // subtree subscribers made on this session's children
	info         sessionInfo // what listings read without the bus lock; info.nsubs counts its subscribers, "all" included (registry.go)

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
