package eventbus

import (
	"container/list"

	"github.com/replaybus/replaybus/scope"
)

// memStore is where the history of a bus lives in this process: the
// session tree with each session's replay buffer (session.go), the
// registry that lists sessions without a bus lock (registry.go), the
// buffers of closed sessions kept for their ancestors (retain.go), and
// what closed or expired sessions took with them (tombstones, lost-id
// marks), which expiry (expire.go) forgets after the session TTL. A bus
// over a backend keeps the same local store, filled by the backend's feed
// (remote.go). Everything here is guarded by Bus.mu held exclusively (and
// may be read under its read side), except what session.go and
// registry.go say otherwise.
type memStore struct {
	registry // sessions by id for lookups without any bus lock (registry.go)
	tree     scope.Tree[*session]
	allLost  uint64 // highest id lost with any closed or expired session
	// lost remembers, for one session TTL, the newest id each closed or
	// expired session took with it; forgotten is the highest such id whose
	// entry has been dropped since. A re-created id is seeded from them.
	lost      map[string]lostMark
	forgotten uint64
	// Closed sessions' buffers kept for their open ancestors (retain.go):
	// by id, and in closing order for expiry and the MaxRetained cap.
	keptByID  map[string]*retained
	keptOrder *list.List
	tombs     map[string]int64 // closed session id → Unix ns of closing
	stats     Stats            // Sessions, Expired, RetainedDropped; the rest lives in Bus.cnt
}
