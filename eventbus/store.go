package eventbus

import (
	"container/list"
	"context"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/observe"
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
	stats     observe.Stats    // Sessions, Expired, RetainedDropped; the rest lives in Bus.cnt
	// maxData is the largest payload (Data bytes) ever appended to a
	// replay buffer of this bus: a resume whose snapshot cannot reach the
	// replay byte budget at that size skips the budget's walk over its
	// records (finishSnapshot). Raised by publishers, rarely: read-mostly;
	// atomic, so no lock guards it.
	maxData atomic.Int64
}

// writer is where an event enters a bus's history: the one seam between
// the delivery protocol and where ids come from. memWriter, the in-memory
// bus, takes each id as it appends the event to the session's Log and fans
// it out, under the session's tree lock, in this process; *remoteStore, a
// bus over a backend (NewWithBackend), appends to the backend,
// whose feed brings every event back to every node in id order (ingest,
// remote.go), where it is appended and fanned out as in memory. Either
// way the history lives in memStore.
type writer interface {
	// publish stores and fans out one validated, encoded event (Publish).
	// media is the interned media type (media.go), 0 for JSON.
	publish(b *Bus, sessionID, typ string, raw []byte, media uint32, origin string, create bool) (Event, error)
	// created is called by CreateSession, with b.mu held exclusively, once
	// x was created or reopened (fresh) or attached to a parent here.
	created(b *Bus, x *session, fresh, reopened bool) error
	// close closes targets, in order, each announced with session_closed
	// (CloseSession, CloseSessionTree); b.mu is held exclusively.
	close(b *Bus, targets []*session) error
	// await returns once the history holds cursor, or it gives up
	// (Subscribe with a cursor, before deciding on epoch_reset); it
	// returns the backend's error, wrapped in ErrBackend, when the
	// backend cannot say how far the history is behind cursor.
	await(b *Bus, ctx context.Context, cursor uint64) error
	// shutdown releases what the writer holds (Close).
	shutdown() error
}

// memWriter is the writer of the in-memory bus.
type memWriter struct{}

func (memWriter) publish(b *Bus, sessionID, typ string, raw []byte, media uint32, origin string, create bool) (Event, error) {
	return b.publishLocal(sessionID, typ, raw, media, origin, create, nil)
}

func (memWriter) created(*Bus, *session, bool, bool) error { return nil }

func (memWriter) close(b *Bus, targets []*session) error {
	for _, x := range targets {
		b.closeLocked(x, true)
	}
	return nil
}

// await has nothing to wait for in memory: every id below the next is held
// or was evicted.
func (memWriter) await(*Bus, context.Context, uint64) error { return nil }

func (memWriter) shutdown() error { return nil }

// scopeRingsLocked returns the replay buffers a subscriber of x with scope k
// replays from, and the highest id lost with sessions that were in that
// scope and have been closed or expired.
func (b *Bus) scopeRingsLocked(x *session, k scope.Kind) ([]store.Log[*record], uint64) {
	switch k {
	case scope.Descendants:
		var rings []store.Log[*record]
		x.node.Walk(func(n *scope.Node[*session]) bool {
			rings = append(rings, n.Value.ring)
			rings = n.Value.keptRings(rings)
			return true
		})
		return rings, x.descLost
	case scope.Subtree:
		rings := []store.Log[*record]{x.ring}
		lost := x.subtreeLost
		if p := x.parent(); p != nil {
			rings = append(rings, p.ring)
			lost = max(lost, p.childLost)
			p.node.Children(func(c *scope.Node[*session]) bool {
				if c.Value != x {
					rings = append(rings, c.Value.ring)
				}
				return true
			})
		}
		return rings, lost
	case scope.All:
		var rings []store.Log[*record]
		b.mem.tree.Each(func(n *scope.Node[*session]) { rings = n.Value.keptRings(append(rings, n.Value.ring)) })
		return rings, b.mem.allLost
	}
	return []store.Log[*record]{x.ring}, 0
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// budgetCut returns how many of snap's records fit the replay byte budget
// (at least one, then up to the record that would exceed it), whether
// snap is in id order, and whether it holds a compacting log's folded
// record (to merge before the cut: mergeFolds); the order and the folds
// are checked over the whole of snap. It is the one pass over the
// records before the reader's.
func budgetCut(snap []*record, budget int64) (n int, sorted, folded bool) {
	n, sorted = len(snap), true
	used, prev := int64(0), uint64(0)
	for i, r := range snap {
		if r.ID < prev {
			sorted = false
		}
		prev = r.ID
		if r.Ext != nil && r.Ext.Fold != nil {
			folded = true
		}
		if n == len(snap) {
			c := int64(len(r.Data))
			if i > 0 && used+c > budget {
				n = i
			}
			used += c
		}
	}
	return n, sorted, folded
}
