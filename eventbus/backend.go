package eventbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Backend is the one seam below the delivery protocol: where ids, history and cross-node
// fan-out live. The in-memory bus ([New]) needs none; adapters/nats
// implements it over NATS JetStream so that several bus nodes share one
// sequence. The delivery protocol — subscriber queues, policies, frames,
// scopes — stays in the Bus and does not know which backend runs.
//
// A Bus made with [NewWithBackend] keeps a local replay buffer per session
// that the backend's feed fills; subscribe, snapshot and replay are local,
// so the four-step subscribe protocol stays gap-free and duplicate-free
// whatever the backend.
type Backend interface {
	// Epoch identifies the backend's history: the same on every node and
	// across node restarts, new when the history is lost (a re-created
	// stream), so that cursors from the old history are an epoch_reset.
	Epoch() string
	// Append stores ev (ID 0; Session, Type, Data, Time, Origin set) for
	// the session whose place in the tree is path (root first, the session
	// last) and returns the id it was given. Ids rise strictly in the order
	// events reach every node's [Feed]. It must not wait on any subscriber;
	// it returns the backend's error (timeouts, no responders, a closed
	// connection) as is. The bus passes a ctx without deadline: the backend
	// bounds the append by its own timeout (one timer per append).
	Append(ctx context.Context, path []string, ev Event) (uint64, error)
	// Start begins feeding every stored event to feed in id order, from the
	// oldest the backend still holds. Calls to feed never overlap. It
	// returns once the feed is running; ctx bounds the start only.
	Start(ctx context.Context, feed Feed) error
	// Close stops the feed and releases the backend. Idempotent.
	Close() error
}

// Feed is what a [Backend] delivers into. The Bus implements it; backends
// call it from one goroutine at a time.
type Feed interface {
	// Ingest hands over one stored event with its id. Events with an id at
	// or below one already ingested are ignored (deduplication by sequence
	// on the hand-off from history to live). A session_closed event closes
	// the session on this node; a TypeSessionCreated event only creates the
	// sessions along path.
	Ingest(path []string, ev Event)
	// Evicted records that the backend dropped the session's events with
	// ids up to upTo before this node saw them, so a resume from before
	// them gets ring_evicted rather than a silent gap. When upTo is at or
	// past the next id the node expects (events it never ingested, not
	// ones its ring already holds), every live subscriber whose scope
	// covers the session also gets state_resync_required{feed_gap} at that
	// point of its stream, before the events that follow the gap.
	Evicted(path []string, upTo uint64)
	// Fail ends every current subscription with err (wrapped in
	// ErrBackend); clients then resume, here once the backend recovers or
	// on another node. The bus stays usable.
	Fail(err error)
}

// Syncer is implemented by a [Backend] whose feed can run behind its
// appends (adapters/nats): LastID asks the backend for the highest id it has
// stored, whichever node appended it.
//
// A Bus over a Syncer uses it when a Subscribe carries a cursor at or past
// the next id this node expects (a client that moves from a node ahead to a
// node behind): Subscribe first waits, bounded by its context and 10 s, until
// the feed has ingested up to min(cursor, LastID), and only then decides on
// epoch_reset, so such a client is neither told to resync nor handed an id
// twice. Without Syncer the wait is for the cursor itself.
type Syncer interface {
	// LastID returns the highest id the backend has stored, or the
	// backend's error (the wait is then skipped).
	LastID(ctx context.Context) (uint64, error)
}

// TypeSessionCreated is the type of the control record a backend-driven bus
// appends for [Bus.CreateSession] so every node learns the session and its
// parent. It consumes an id but is never stored or delivered.
const TypeSessionCreated = "_replaybus.session_created"

// ErrBackend wraps a backend failure that ended a subscription.
var ErrBackend = errors.New("eventbus: backend failure")

// NewWithBackend returns a Bus whose ids, history and cross-node fan-out
// come from be, as [New] otherwise. The bus's epoch is be.Epoch(). It calls
// be.Start and returns its error; [Bus.Close] also closes be.
func NewWithBackend(ctx context.Context, cfg Options, be Backend) (*Bus, error) {
	cfg.Epoch = be.Epoch()
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	b.backend = be
	if err := be.Start(ctx, busFeed{b}); err != nil {
		b.Close()
		return nil, fmt.Errorf("eventbus: starting backend: %w", err)
	}
	return b, nil
}

// busFeed keeps the Feed methods off the Bus's own method set.
type busFeed struct{ b *Bus }

func (f busFeed) Ingest(path []string, ev Event) { f.b.ingest(path, ev) }
func (f busFeed) Evicted(path []string, upTo uint64) {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(path) == 0 {
		return
	}
	if x := b.ensurePathLocked(path); x != nil {
		x.ring.MarkEvicted(upTo)
		if upTo > b.seq.Load() {
			b.announceGapLocked(x, upTo)
		}
	}
}
func (f busFeed) Fail(err error) {
	b := f.b
	b.mu.Lock()
	var subs []*Subscription
	b.eachSubLocked(func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		b.unregisterLocked(s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.end(fmt.Errorf("%w: %w", ErrBackend, err), false)
	}
}

// pathLocked returns x's place in the tree, root first.
func (x *session) pathLocked() []string {
	var path []string
	for a := x; a != nil; a = a.parent() {
		path = append(path, a.id)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// ensurePathLocked returns the session at the end of path, creating missing
// sessions along it with their parents; closed ancestors are skipped, and a
// closed final session is opened again (see the comment inside). It returns
// nil only when a session cannot be created.
func (b *Bus) ensurePathLocked(path []string) *session {
	var x *session
	parent := ""
	for i, id := range path {
		if _, closed := b.tombs[id]; closed {
			if i < len(path)-1 {
				// A closed ancestor: its children became roots when it
				// closed; the event still belongs to the live child.
				parent = ""
				continue
			}
			// The session itself was closed here, yet the stream holds a
			// later event for it: its id was reused after its tombstone
			// expired on the publishing node (or a node that had not yet
			// seen the close published). Every node takes it the same
			// way: the id lives again.
			delete(b.tombs, id)
		}
		if n := b.tree.Get(id); n != nil {
			x = n.Value
			if x.parent() == nil && parent != "" {
				// Attached late (CreateSession on a root), as in memory.
				if b.treeSetParentLocked(id, parent) == nil {
					b.attachedLocked(x)
				}
			}
		} else {
			var err error
			if x, err = b.addLocked(id, parent); err != nil {
				return nil
			}
		}
		parent = id
	}
	return x
}

// ingest is Feed.Ingest.
func (b *Bus) ingest(path []string, ev Event) {
	if len(path) == 0 {
		return
	}
	defer b.flushDiagnostics() // after b.mu is released
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.wakeFeedWaitersLocked()
	if b.closed || ev.ID <= b.seq.Load() {
		return
	}
	b.seq.Store(ev.ID - 1) // appendLocked takes this id
	if _, closed := b.tombs[path[len(path)-1]]; closed && ev.Type == TypeSessionClosed {
		b.seq.Store(ev.ID) // closed twice (two nodes at once): once is enough
		return
	}
	x := b.ensurePathLocked(path)
	if x == nil || ev.Type == TypeSessionCreated {
		b.seq.Store(ev.ID)
		return
	}
	r := &record{session: x.id, typ: ev.Type, data: ev.Data, origin: originRef(ev.Origin), nanos: ev.Time.UnixNano()}
	if ev.Type == TypeSessionClosed {
		b.appendLocked(x, r, true, &fan{})
		b.tombs[x.id] = r.nanos
		b.closeLocked(x, false)
		return
	}
	b.appendLocked(x, r, false, &fan{})
}

// feedWaiter is a Subscribe waiting until the feed has ingested upTo.
type feedWaiter struct {
	upTo uint64
	ch   chan struct{}
}

// wakeFeedWaitersLocked releases the waiters the feed has caught up with.
func (b *Bus) wakeFeedWaitersLocked() {
	if len(b.feedWaiters) == 0 {
		return
	}
	kept := b.feedWaiters[:0]
	for _, w := range b.feedWaiters {
		if w.upTo <= b.seq.Load() {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(b.feedWaiters[len(kept):])
	b.feedWaiters = kept
}

// awaitFeed is the wait of [Syncer]: it returns once this node has ingested
// up to cursor (or the backend's last id, if lower), ctx is done, the bus
// closes or backendTimeout passes. It returns at once for a cursor below the
// next id, and does nothing for the in-memory bus.
func (b *Bus) awaitFeed(ctx context.Context, cursor uint64) {
	if b.backend == nil {
		return // in memory: nothing to wait for, and no lock to take
	}
	b.mu.Lock()
	behind := b.backend != nil && !b.closed && cursor > b.seq.Load()
	b.mu.Unlock()
	if !behind {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	target := cursor
	if sy, ok := b.backend.(Syncer); ok {
		last, err := sy.LastID(ctx)
		if err != nil {
			return
		}
		target = min(target, last)
	}
	w := feedWaiter{upTo: target, ch: make(chan struct{})}
	b.mu.Lock()
	if b.closed || target <= b.seq.Load() {
		b.mu.Unlock()
		return
	}
	b.feedWaiters = append(b.feedWaiters, w)
	b.mu.Unlock()
	select {
	case <-w.ch:
		return
	case <-ctx.Done():
	case <-b.stopTTL:
	}
	b.mu.Lock()
	b.feedWaiters = slices.DeleteFunc(b.feedWaiters, func(x feedWaiter) bool { return x.ch == w.ch })
	b.mu.Unlock()
}

// backendTimeout bounds the wait of awaitFeed.
const backendTimeout = 10 * time.Second

// appendRemote hands one event to the backend (Publish, CloseSession and
// CreateSession of a backend-driven bus).
func (b *Bus) appendRemote(path []string, ev Event) (Event, error) {
	id, err := b.backend.Append(context.Background(), path, ev)
	if err != nil {
		return Event{}, fmt.Errorf("eventbus: publish to backend: %w", err)
	}
	ev.ID = id
	b.mu.Lock()
	if id > b.highWater {
		b.highWater = id
	}
	b.mu.Unlock()
	return ev, nil
}
