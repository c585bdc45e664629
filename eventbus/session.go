package eventbus

import (
	"github.com/replaybus/replaybus/replay"
	"github.com/replaybus/replaybus/scope"
)

// session is the bus's state for one session: its replay buffer, its place
// in the tree and its subscriber lists. Guarded by the bus lock.
type session struct {
	id   string
	node *scope.Node[*session]
	ring *replay.Buffer[*record]

	own          subList     // subscribers made on this session (all scopes but "all")
	desc         subList     // those of own with scope descendants
	childSubtree subList     // subtree subscribers made on this session's children
	nsubs        int         // subscribers made on this session, "all" included
	info         sessionInfo // what listings read without the bus lock (registry.go)

	published bool   // a child may get a parent only before it publishes
	lastID    uint64 // id of the newest event published here
	active    int64  // Unix ns of the last publish or unsubscribe

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

func (x *session) touch(now int64) {
	if now > x.active {
		x.active = now
	}
}
