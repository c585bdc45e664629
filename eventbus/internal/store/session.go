package store

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/scope"
)

// Session is one session of a [History]: its log, its place in the tree,
// its producers' records, and Subs, the delivery side's state for it. Its
// place in the tree changes only under the structure lock held
// exclusively; its log, records and Subs are guarded by its tree's lock
// under the structure lock's read side, or by the structure lock held
// exclusively.
type Session[T any] struct {
	ID   string
	Subs T

	// tmu is the tree lock when this session is a root: the lock of the
	// whole tree below it (TreeLock). Unused while it has a parent.
	tmu  sync.Mutex
	node *scope.Node[*Session[T]]
	log  Log[*queue.Record]

	published bool   // an event was published here (this node's, over a backend)
	lastID    uint64 // id of the newest event appended here
	// active is the Unix ns of the last publish, subscribe or unsubscribe;
	// atomic, since an "all" subscriber made here may be unsubscribed by a
	// publisher of another tree.
	active atomic.Int64

	// What listings read without a lock: subscribers made here (any
	// scope), the newest id, the records held.
	nsubs    atomic.Int32
	infoLast atomic.Uint64
	buffered atomic.Int32

	// Highest ids lost with a closed or expired session that was in this
	// session's descendants (descLost), its subtree as parent-or-sibling
	// (subtreeLost), or among its children (childLost); a resume from
	// before them is told with ring_evicted.
	descLost, subtreeLost, childLost uint64

	// kept are closed sessions' logs held for this session's descendants
	// and all scopes (and its ancestors'), see retain.go.
	kept []*retained[T]

	// producers is the record of the idempotent producers that published
	// here, the MaxProducers most recently used (producers.go).
	producers *producerLRU[ProducerRecord]

	// turns is the session's turn state (turns.go); nil until its first
	// turn record. keepEnded is how many ended turns it remembers: its
	// log's record bound (at least MaxEndedTurns).
	turns     *turns
	keepEnded int
}

// Parent returns x's parent, nil for a root. The structure lock is held.
func (x *Session[T]) Parent() *Session[T] {
	if p := x.node.Parent(); p != nil {
		return p.Value
	}
	return nil
}

// NumChildren returns how many children x has. The structure lock is held.
func (x *Session[T]) NumChildren() int { return x.node.NumChildren() }

// TreeLock returns the lock of x's session tree: its root's. The caller
// holds the structure lock (either side), which keeps the tree's shape,
// and so the root, fixed until it is released; trees merge (a root
// attached late) and split (a close whose children become roots) only
// under the structure lock held exclusively, when no tree lock is held.
func (x *Session[T]) TreeLock() *sync.Mutex {
	r := x.node
	for p := r.Parent(); p != nil; p = p.Parent() {
		r = p
	}
	return &r.Value.tmu
}

// Path returns x's place in the tree, root first. The structure lock is
// held.
func (x *Session[T]) Path() []string {
	var path []string
	for a := x; a != nil; a = a.Parent() {
		path = append(path, a.ID)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// Touch moves x's last activity forward to now (Unix ns), never back; no
// lock.
func (x *Session[T]) Touch(now int64) {
	for {
		old := x.active.Load()
		if now <= old || x.active.CompareAndSwap(old, now) {
			return
		}
	}
}

// Published reports whether an event was appended to x, or MarkPublished
// called; MarkPublished marks x so. The structure lock is held exclusively
// for MarkPublished, or x's tree lock.
func (x *Session[T]) Published() bool { return x.published }

// MarkPublished marks x as published to (a publish over a backend, whose
// event arrives later through the feed).
func (x *Session[T]) MarkPublished() { x.published = true }

// Subscribers returns the subscribers made on x; no lock.
func (x *Session[T]) Subscribers() int { return int(x.nsubs.Load()) }

// AddSubscribers adds d (±1) to x's subscriber count; no lock.
func (x *Session[T]) AddSubscribers(d int32) { x.nsubs.Add(d) }

// MarkEvicted records that x's ids up to upTo are lost (history a backend
// dropped), as if evicted. The structure lock is held exclusively.
func (x *Session[T]) MarkEvicted(upTo uint64) { x.log.MarkEvicted(upTo) }

// Producer returns x's record of producer id, if it has one, marking it
// the most recently used. x's tree lock or the structure lock is held.
func (x *Session[T]) Producer(id string) (ProducerRecord, bool) { return x.producers.get(id) }

// SetProducer sets x's record of producer id, forgetting the least
// recently used producer past MaxProducers. Locks as Producer.
func (x *Session[T]) SetProducer(id string, rec ProducerRecord) {
	if x.producers == nil {
		x.producers = new(producerLRU[ProducerRecord])
	}
	x.producers.put(id, rec)
}

// Producers returns how many producers x remembers. Locks as Producer.
func (x *Session[T]) Producers() int { return x.producers.len() }

// ProducerRecord is a session's record of one idempotent producer: its
// state, and over a backend the revision of the backend's record it was
// read or written at (0 in memory, where the session's record is the
// authority).
type ProducerRecord struct {
	State producer.State
	Rev   uint64
}

// Subtree returns x and every session below it in the order a cascading
// close closes them: each after all of its descendants, siblings in id
// order. Iterative, so a tree of any depth is fine. The structure lock is
// held.
func (x *Session[T]) Subtree() []*Session[T] {
	// A pre-order walk with children visited in reverse id order,
	// reversed, puts children before parents and siblings in id order.
	var out []*Session[T]
	stack := []*Session[T]{x}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, y)
		start := len(stack)
		y.node.Children(func(c *scope.Node[*Session[T]]) bool { stack = append(stack, c.Value); return true })
		slices.SortFunc(stack[start:], func(a, b *Session[T]) int { return strings.Compare(a.ID, b.ID) })
	}
	slices.Reverse(out)
	return out
}
