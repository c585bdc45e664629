package eventbus

import (
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/observe"
)

// The session registry: every live session by id in an xsync.MapOf (a
// concurrent hash map whose reads take no lock), kept beside the tree, so
// that lookups and listings — SessionExists, Sessions, SubscriberCounts, and
// through them the SSE handler's 404 check and the example server's
// /sessions — never wait for the bus lock that publishing holds.
//
// What a listing reads of a session is published by the writers with
// atomics (sessionInfo); the parent, which only structural changes move
// (create, reparent, close, expire), is read under treeMu, which those
// changes take inside the structure lock (b.mu, held exclusively) and which
// no publish ever takes. A publish itself finds its session here, under the
// structure lock's read side, without taking any bus-wide exclusive lock.
//
// Invariant: b.mem.sessions holds exactly the ids of b.mem.tree; both change
// together under b.mu held exclusively (and b.mem.treeMu for the tree's shape).
type registry struct {
	sessions *xsync.MapOf[string, *session]
	treeMu   sync.RWMutex // guards the tree's parent links against readers outside b.mu
}

func newRegistry() registry {
	return registry{sessions: xsync.NewMapOf[string, *session]()}
}

// sessionInfo is what listings read of a session without any bus lock;
// written by the paths that change it, under the session's tree lock or the
// structure lock (nsubs: atomically, from any tree).
type sessionInfo struct {
	nsubs    atomic.Int32  // subscribers made on the session (any scope)
	lastID   atomic.Uint64 // newest id published to it
	buffered atomic.Int32  // events in its replay buffer
}

// treeAddLocked adds x to the tree under parent and to the registry. b.mu
// must be held exclusively.
func (b *Bus) treeAddLocked(x *session, parent string) error {
	b.mem.treeMu.Lock()
	n, err := b.mem.tree.Add(x.id, parent, x)
	if err == nil {
		x.node = n
	}
	b.mem.treeMu.Unlock()
	if err == nil {
		b.mem.sessions.Store(x.id, x)
	}
	return err
}

// treeSetParentLocked gives the root id its parent. b.mu must be held
// exclusively.
func (b *Bus) treeSetParentLocked(id, parent string) error {
	b.mem.treeMu.Lock()
	defer b.mem.treeMu.Unlock()
	return b.mem.tree.SetParent(id, parent)
}

// treeRemoveLocked removes x from the registry and the tree (its children
// become roots). b.mu must be held exclusively.
func (b *Bus) treeRemoveLocked(x *session) {
	b.mem.sessions.Delete(x.id)
	b.mem.treeMu.Lock()
	b.mem.tree.Remove(x.id, false)
	b.mem.treeMu.Unlock()
}

// SessionExists reports whether session id exists (created and neither
// closed nor expired). It takes no lock (a concurrent map read) and never
// waits for a publish; safe for concurrent use.
func (b *Bus) SessionExists(id string) bool {
	_, ok := b.mem.sessions.Load(id)
	return ok
}

// Sessions lists every live session, in no particular order. It never
// waits for a publish: it reads the session registry (a concurrent map)
// and each session's counters (atomics); only a concurrent structural change
// (create with a parent, close, expire) is waited for, briefly, to read
// parents. A session created or closed during the call may or may not be
// listed, and each session's figures are read one by one, not as one
// snapshot. O(sessions).
func (b *Bus) Sessions() []observe.SessionInfo {
	out := make([]observe.SessionInfo, 0, b.mem.sessions.Size())
	b.mem.treeMu.RLock()
	defer b.mem.treeMu.RUnlock()
	b.mem.sessions.Range(func(id string, x *session) bool {
		info := observe.SessionInfo{ID: id, Subscribers: int(x.info.nsubs.Load()),
			Buffered: int(x.info.buffered.Load()), LastEventID: x.info.lastID.Load()}
		if p := x.node.Parent(); p != nil {
			info.Parent = p.ID
		}
		out = append(out, info)
		return true
	})
	return out
}

// SubscriberCounts returns the number of subscribers made on each session
// that has any, as AgentPool's get_subscriber_counts. Like Sessions, it
// reads the registry and never waits for a publish.
func (b *Bus) SubscriberCounts() map[string]int {
	out := make(map[string]int)
	b.mem.sessions.Range(func(id string, x *session) bool {
		if n := x.info.nsubs.Load(); n > 0 {
			out[id] = int(n)
		}
		return true
	})
	return out
}
