package eventbus

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// remoteStore is the backend side of a bus made with NewWithBackend: be is
// nil for the in-memory bus. feedWaiters is guarded by Bus.mu; highWater
// is atomic, so that an ack takes no bus lock.
type remoteStore struct {
	be          Backend
	highWater   atomic.Uint64 // highest id the backend acknowledged to this node (only rises)
	feedWaiters []feedWaiter  // subscribes waiting for the backend feed (awaitFeed)
}

// typeSessionCreated is the type of the control record a bus over a
// backend appends for CreateSession, so that every node learns the
// session and its parent. It consumes an id but is never stored or
// delivered ([frame.Reserved] refuses it to publishers).
const typeSessionCreated = "_replaybus.session_created"

// busFeed is the Feed of a bus over a backend: what the backend
// delivers into. A type of its own keeps the Feed methods off the Bus's
// method set.
type busFeed struct{ b *Bus }

// Ingest is Feed.Ingest.
func (f busFeed) Ingest(path []string, ev Event) { f.b.ingest(path, ev) }

// Evicted is Feed.Evicted.
func (f busFeed) Evicted(path []string, upTo uint64) {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(path) == 0 {
		return
	}
	if x := b.ensurePathLocked(path); x != nil {
		x.ring.MarkEvicted(upTo)
		if upTo > b.hot.seq.Load() {
			b.idx.gap(x, upTo)
		}
	}
}

// Fail is Feed.Fail.
func (f busFeed) Fail(err error) {
	b := f.b
	b.mu.Lock()
	var subs []*Subscription
	b.idx.each(&b.mem.tree, func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		b.idx.unregister(s)
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
		if _, closed := b.mem.tombs[id]; closed {
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
			delete(b.mem.tombs, id)
		}
		if n := b.mem.tree.Get(id); n != nil {
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
	defer b.idx.flush() // after b.mu is released
	// Subscribers are woken once b.mu is released, as on the in-memory
	// publish path: the publishers of this node wait for b.mu meanwhile.
	f := newFan()
	defer f.release()
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.wakeFeedWaitersLocked()
	if b.closed || ev.ID <= b.hot.seq.Load() {
		return
	}
	b.hot.seq.Store(ev.ID - 1) // appendLocked takes this id
	if _, closed := b.mem.tombs[path[len(path)-1]]; closed && ev.Type == frame.TypeSessionClosed {
		b.hot.seq.Store(ev.ID) // closed twice (two nodes at once): once is enough
		return
	}
	x := b.ensurePathLocked(path)
	if x == nil || ev.Type == typeSessionCreated {
		b.hot.seq.Store(ev.ID)
		return
	}
	r := &record{Session: x.id, Type: ev.Type, Data: ev.Data, Ext: extOf(ev.Origin, ev.media), Nanos: ev.Time.UnixNano()}
	if ev.Type == frame.TypeSessionClosed {
		b.appendLocked(x, r, true, &fan{}) // wakes at once, as closeLocked does
		b.mem.tombs[x.id] = r.Nanos
		b.closeLocked(x, false)
		return
	}
	b.appendLocked(x, r, false, &f)
}

// feedWaiter is a Subscribe waiting until the feed has ingested upTo.
type feedWaiter struct {
	upTo uint64
	ch   chan struct{}
}

// wakeFeedWaitersLocked releases the waiters the feed has caught up with.
func (b *Bus) wakeFeedWaitersLocked() {
	if len(b.remote.feedWaiters) == 0 {
		return
	}
	kept := b.remote.feedWaiters[:0]
	for _, w := range b.remote.feedWaiters {
		if w.upTo <= b.hot.seq.Load() {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(b.remote.feedWaiters[len(kept):])
	b.remote.feedWaiters = kept
}

// await is the wait of Syncer (writer.await): it returns once
// this node has ingested up to cursor (or the backend's last id, if
// lower), ctx is done, the bus closes or backendTimeout passes. It returns
// at once for a cursor below the next id, and with LastID's error, wrapped
// in ErrBackend, when the backend cannot say its last id (a node cut off
// from its backend): Subscribe fails then, rather than answer epoch_reset
// to a cursor that may well be valid.
func (rs *remoteStore) await(b *Bus, ctx context.Context, cursor uint64) error {
	b.mu.Lock()
	behind := !b.closed && cursor > b.hot.seq.Load()
	b.mu.Unlock()
	if !behind {
		return nil
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	target := cursor
	if sy, ok := b.remote.be.(Syncer); ok {
		last, err := sy.LastID(ctx)
		if err != nil && caller.Err() != nil {
			return caller.Err() // the subscriber went away
		}
		if err != nil {
			return fmt.Errorf("%w: cursor %d is past this node's last id %d, and the backend cannot say how far behind it is: %w",
				ErrBackend, cursor, b.hot.seq.Load(), err)
		}
		target = min(target, last)
	}
	w := feedWaiter{upTo: target, ch: make(chan struct{})}
	b.mu.Lock()
	if b.closed || target <= b.hot.seq.Load() {
		b.mu.Unlock()
		return nil
	}
	b.remote.feedWaiters = append(b.remote.feedWaiters, w)
	b.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	case <-b.ttl.stop:
	}
	b.mu.Lock()
	b.remote.feedWaiters = slices.DeleteFunc(b.remote.feedWaiters, func(x feedWaiter) bool { return x.ch == w.ch })
	b.mu.Unlock()
	return nil
}

// backendTimeout bounds the wait of await.
const backendTimeout = 10 * time.Second

// appendRemote hands one event to the backend (Publish, CloseSession and
// CreateSession of a backend-driven bus).
func (b *Bus) appendRemote(path []string, ev Event) (Event, error) {
	id, err := b.remote.be.Append(context.Background(), path, ev)
	if err != nil {
		return Event{}, fmt.Errorf("eventbus: publish to backend: %w", err)
	}
	ev.ID = id
	b.noteAcked(id)
	return ev, nil
}

// noteAcked raises the highest id the backend acknowledged to this node.
func (b *Bus) noteAcked(id uint64) {
	for {
		old := b.remote.highWater.Load()
		if id <= old || b.remote.highWater.CompareAndSwap(old, id) {
			return
		}
	}
}

// preparePublish is the first half of a pipelined publish over a backend
// (Pipeline.Publish): the checks and
// the encoding of [Bus.Publish] and its options (Existing, WithOrigin),
// then, under the lock, the session (created if new, as Publish creates
// it, unless Existing; marked published) and its tree path.
func (b *Bus) preparePublish(sessionID, typ string, data any, opts []PublishOption) (Event, []string, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, nil, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, nil, err
	}
	origin, create, p := publishOpts(opts) // Existing and WithOrigin, as Publish
	if p != nil {
		return Event{}, nil, producer.ErrUnsupported // a backend's pipeline: not checked, so refused
	}
	// A session this node knows and has published to already (a
	// producer's stream of events) needs only the read side.
	tok := b.mu.RLock()
	if n := b.mem.tree.Get(sessionID); !b.closed && n != nil && n.Value.published {
		path := n.Value.pathLocked()
		b.mu.RUnlock(tok)
		return Event{Session: sessionID, Type: typ, Data: raw, Time: b.cfg.now(), Origin: origin}, path, nil
	}
	b.mu.RUnlock(tok)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Event{}, nil, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, create)
	if err != nil {
		return Event{}, nil, err
	}
	x.published = true
	return Event{Session: sessionID, Type: typ, Data: raw, Time: b.cfg.now(), Origin: origin}, x.pathLocked(), nil
}

// publish is writer.publish over a backend: the backend assigns the id and
// the feed delivers (ingest).
func (rs *remoteStore) publish(b *Bus, sessionID, typ string, raw []byte, media uint32, origin string, create bool) (Event, error) {
	return b.publishRemote(sessionID, typ, raw, media, origin, create)
}

// created is writer.created over a backend: the creation, reopening
// (fresh) or attachment of x is appended to the backend so every node
// learns it. b.mu is held exclusively; it is released for the append.
// When a fresh session could not be appended and nothing used it
// meanwhile, no other node learnt of it: it is removed again (and a
// reopened id closed again) rather than kept as a local phantom.
func (rs *remoteStore) created(b *Bus, x *session, fresh, reopened bool) error {
	path := x.pathLocked()
	now := b.cfg.now()
	b.mu.Unlock()
	_, err := b.appendRemote(path, Event{Session: x.id, Type: typeSessionCreated, Time: now})
	b.mu.Lock()
	if fresh && err != nil && !b.closed && b.mem.tree.Get(x.id) == x.node && x.info.nsubs.Load() == 0 && !x.published && x.node.NumChildren() == 0 {
		b.treeRemoveLocked(x)
		b.mem.stats.Sessions--
		if reopened {
			b.mem.tombs[x.id] = b.nowNanos()
		}
	}
	return err
}

// close is writer.close over a backend: a session_closed event is appended
// for each target, in order; every node, this one included, closes the
// session when its feed ingests it. b.mu is held exclusively; it is
// released for the appends.
func (rs *remoteStore) close(b *Bus, targets []*session) error {
	type job struct {
		path []string
		id   string
	}
	jobs := make([]job, len(targets))
	for i, x := range targets {
		jobs[i] = job{x.pathLocked(), x.id}
	}
	b.mu.Unlock()
	defer b.mu.Lock()
	for _, j := range jobs {
		ev := Event{Session: j.id, Type: frame.TypeSessionClosed, Time: b.cfg.now(),
			Data: mustJSON(frame.SessionClosedData{Session: j.id, Reason: "closed"})}
		if _, err := b.appendRemote(j.path, ev); err != nil {
			return err
		}
	}
	return nil
}

// shutdown is writer.shutdown over a backend: it closes the backend.
func (rs *remoteStore) shutdown() error { return rs.be.Close() }
