package eventbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/hook"
)

// remote is what the bus needs of the backend a bus of package
// eventbus/backend is made over (a backend.Backend satisfies it): the
// backend appends, and its feed (busFeed) delivers. Its optional LastID
// (backend.Syncer) bounds awaitFeed's wait.
type remote interface {
	Epoch() string
	Append(ctx context.Context, path []string, ev Event) (uint64, error)
	Close() error
}

// syncer is backend.Syncer.
type syncer interface {
	LastID(ctx context.Context) (uint64, error)
}

// typeSessionCreated is backend.typeSessionCreated: the control record a
// bus over a backend appends for CreateSession so every node learns the
// session and its parent. It consumes an id but is never stored or
// delivered.
const typeSessionCreated = "_replaybus.session_created"

// ErrBackend wraps a backend failure that ended a subscription.
var ErrBackend = errors.New("eventbus: backend failure")

func init() {
	hook.NewBus = func(opts, be any) (any, any, error) {
		r, ok := be.(remote)
		if !ok {
			return nil, nil, invalidf("backend %T does not implement Epoch, Append and Close", be)
		}
		o := opts.(Options)
		o.Epoch = r.Epoch()
		b, err := New(o)
		if err != nil {
			return nil, nil, err
		}
		b.remote = r
		return b, busFeed{b}, nil
	}
	hook.Prepare = func(bus any, sessionID, typ string, data, opts any) (any, []string, error) {
		po, _ := opts.([]PublishOption)
		return bus.(*Bus).preparePublish(sessionID, typ, data, po)
	}
	hook.Acked = func(bus any, id uint64) { bus.(*Bus).noteAcked(id) }
	hook.Backend = func(bus any) any {
		if r := bus.(*Bus).remote; r != nil {
			return r
		}
		return nil
	}
}

// busFeed is the backend.Feed of a bus over a backend: what the backend
// delivers into. A type of its own keeps the Feed methods off the Bus's
// method set.
type busFeed struct{ b *Bus }

// Ingest is backend.Feed.Ingest.
func (f busFeed) Ingest(path []string, ev Event) { f.b.ingest(path, ev) }

// Evicted is backend.Feed.Evicted.
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

// Fail is backend.Feed.Fail.
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
	if _, closed := b.tombs[path[len(path)-1]]; closed && ev.Type == frame.TypeSessionClosed {
		b.seq.Store(ev.ID) // closed twice (two nodes at once): once is enough
		return
	}
	x := b.ensurePathLocked(path)
	if x == nil || ev.Type == typeSessionCreated {
		b.seq.Store(ev.ID)
		return
	}
	r := &record{session: x.id, typ: ev.Type, data: ev.Data, origin: originRef(ev.Origin), nanos: ev.Time.UnixNano()}
	if ev.Type == frame.TypeSessionClosed {
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

// awaitFeed is the wait of backend.Syncer: it returns once this node has ingested
// up to cursor (or the backend's last id, if lower), ctx is done, the bus
// closes or backendTimeout passes. It returns at once for a cursor below the
// next id, and does nothing for the in-memory bus.
func (b *Bus) awaitFeed(ctx context.Context, cursor uint64) {
	if b.remote == nil {
		return // in memory: nothing to wait for, and no lock to take
	}
	b.mu.Lock()
	behind := b.remote != nil && !b.closed && cursor > b.seq.Load()
	b.mu.Unlock()
	if !behind {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	target := cursor
	if sy, ok := b.remote.(syncer); ok {
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
	id, err := b.remote.Append(context.Background(), path, ev)
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

// noteAcked raises the highest id the backend acknowledged to this node.
func (b *Bus) noteAcked(id uint64) {
	if id == 0 {
		return
	}
	b.mu.Lock()
	if id > b.highWater {
		b.highWater = id
	}
	b.mu.Unlock()
}

// preparePublish is the first half of a pipelined publish over a backend
// (hook.Prepare): the checks and
// the encoding of [Bus.Publish], then, under the lock, the session (created
// as a root if new, marked published) and its tree path.
func (b *Bus) preparePublish(sessionID, typ string, data any, opts []PublishOption) (Event, []string, error) {
	var origin string
	if len(opts) > 0 {
		opts = slices.DeleteFunc(slices.Clone(opts), func(o PublishOption) bool { return o == nil })
		var po publishOptions
		for _, o := range opts {
			o(&po)
		}
		origin = po.origin
	}
	if err := checkName("session id", sessionID); err != nil {
		return Event{}, nil, err
	}
	if err := checkName("event type", typ); err != nil {
		return Event{}, nil, err
	}
	if frame.Reserved(typ) {
		return Event{}, nil, invalidf("event type %q is reserved for the bus's own frames", typ)
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Event{}, nil, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, true)
	if err != nil {
		return Event{}, nil, err
	}
	x.published = true
	return Event{Session: sessionID, Type: typ, Data: raw, Time: b.cfg.now(), Origin: origin}, x.pathLocked(), nil
}
