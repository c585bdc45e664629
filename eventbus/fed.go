package eventbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// fedStore is the store of a bus made with NewWithBackend: a publish is
// appended to the backend, which gives its id; the backend's feed (Ingest,
// Evicted, Fail: fedStore is the Feed) brings every event back to every
// node in id order, and local, this node's memStore, appends and delivers
// it as in memory.
type fedStore struct {
	local *memStore
	h     *history // local.h
	be    backend.Backend
	prod  backend.ProducerBackend // be, when it keeps producers' records; nil otherwise
	async backend.AsyncBackend    // be, when it keeps appends in flight; nil otherwise
	stop  <-chan struct{}         // closed by Bus.Close: waits give up
	// highWater is the highest id the backend acknowledged to this node
	// (only rises; atomic, so that an ack takes no lock); waiters are the
	// subscribes waiting for the feed (await), under the structure lock.
	highWater atomic.Uint64
	waiters   []feedWaiter
}

// backendTimeout bounds a wait for the feed (await) and a producer's
// check against the backend.
const backendTimeout = 10 * time.Second

// typeSessionCreated is the type of the control record a bus over a
// backend appends for CreateSession, so that every node learns the
// session and its parent. It consumes an id but is never stored or
// delivered ([frame.Reserved] refuses it to publishers).
const typeSessionCreated = "_replaybus.session_created"

func newFedStore(local *memStore, be backend.Backend, stop <-chan struct{}) *fedStore {
	f := &fedStore{local: local, h: local.h, be: be, stop: stop}
	f.prod, _ = be.(backend.ProducerBackend)
	f.async, _ = be.(backend.AsyncBackend)
	return f
}

// publish is store.publish over a backend: the backend gives the id and
// the feed delivers (Ingest). A stamped publish is checked against the
// backend's record of its producer (publishProducer).
func (f *fedStore) publish(id string, r *record, create bool, p *producer.Stamp) (Event, error) {
	if p != nil && f.prod == nil {
		return Event{}, producer.ErrUnsupported
	}
	path, err := f.target(id, create)
	if err != nil {
		return Event{}, err
	}
	r.Session = id
	ev := eventOf(r, false)
	if p != nil {
		return f.publishProducer(path, ev, p)
	}
	return f.append(path, ev)
}

// target is the first half of a publish over a backend: the session
// (created if new and create, as in memory; marked published, so that a
// failed CreateSession does not take it back) and its tree path. A closed
// session is refused as in memory. A session this node has published to
// already needs only the structure lock's read side.
func (f *fedStore) target(id string, create bool) ([]string, error) {
	tok := f.h.RLock()
	if x := f.h.Get(id); !f.h.Closed() && x != nil && x.Published() {
		path := x.Path()
		f.h.RUnlock(tok)
		return path, nil
	}
	f.h.RUnlock(tok)
	f.h.Lock()
	defer f.h.Unlock()
	if f.h.Closed() {
		return nil, ErrClosed
	}
	x, err := f.local.open(id, create)
	if err != nil {
		return nil, err
	}
	x.MarkPublished()
	return x.Path(), nil
}

// open is memStore.open: a session a subscribe makes is this node's
// until an event is published to it.
func (f *fedStore) open(id string, create bool) (*session, error) { return f.local.open(id, create) }

// append hands one event to the backend and returns it with its id.
func (f *fedStore) append(path []string, ev Event) (Event, error) {
	id, err := f.be.Append(context.Background(), path, recordOf(&ev))
	if err != nil {
		return Event{}, fmt.Errorf("eventbus: publish to backend: %w", err)
	}
	ev.ID = id
	f.acked(id)
	return ev, nil
}

// acked raises the highest id the backend acknowledged to this node.
func (f *fedStore) acked(id uint64) {
	for {
		old := f.highWater.Load()
		if id <= old || f.highWater.CompareAndSwap(old, id) {
			return
		}
	}
}

// publishProducer appends ev stamped p: it checks p against the record
// of p.ID (this node's copy, else read from the backend) and appends the
// event with p's record under the backend's check that the record is
// still at the revision checked against; when it moved meanwhile (a
// concurrent publish of the same producer, through any node), it reads
// the record again and checks again, all bounded by backendTimeout. A
// refusal is always made against a fresh read.
func (f *fedStore) publishProducer(path []string, ev Event, p *producer.Stamp) (Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), backendTimeout)
	defer cancel()
	id := ev.Session
	rec, cached := f.producerCopy(id, p.ID)
	fresh := !cached
	for {
		if fresh {
			st, rev, err := f.prod.ProducerState(ctx, id, p.ID)
			if err != nil {
				return Event{}, fmt.Errorf("eventbus: producer record from backend: %w", err)
			}
			rec = store.ProducerRecord{State: st, Rev: rev}
			f.keepProducer(id, p.ID, rec)
		}
		if err := checkStamp(id, rec.State, rec.Rev != 0, p); err != nil {
			if !fresh {
				fresh = true // refuse only on the backend's word
				continue
			}
			return Event{}, err
		}
		eid, rev, err := f.prod.AppendProducer(ctx, path, recordOf(&ev), *p, rec.Rev)
		if errors.Is(err, backend.ErrProducerConflict) && ctx.Err() == nil {
			fresh = true
			continue
		}
		var pe *producer.Error
		if errors.As(err, &pe) {
			// The backend knew the event (a concurrent retry, over NATS
			// by its Nats-Msg-Id): name it from the record if it can.
			if st, rev, err := f.prod.ProducerState(ctx, id, p.ID); err == nil {
				f.keepProducer(id, p.ID, store.ProducerRecord{State: st, Rev: rev})
				if err := checkStamp(id, st, rev != 0, p); errors.Is(err, producer.ErrDuplicate) {
					return Event{}, err
				}
			}
			return Event{}, pe
		}
		if err != nil {
			return Event{}, fmt.Errorf("eventbus: publish to backend: %w", err)
		}
		f.keepProducer(id, p.ID, store.ProducerRecord{State: producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: eid}, Rev: rev})
		ev.ID = eid
		f.acked(eid)
		return ev, nil
	}
}

// producerCopy returns this node's copy of producer id's record in
// session, if it has one: a cache that saves the read when the node's own
// producer publishes again, never the authority.
func (f *fedStore) producerCopy(session, id string) (store.ProducerRecord, bool) {
	f.h.Lock()
	defer f.h.Unlock()
	if x := f.h.Get(session); x != nil {
		return x.Producer(id)
	}
	return store.ProducerRecord{}, false
}

// keepProducer stores this node's copy of producer id's record in session
// (while the session lives here).
func (f *fedStore) keepProducer(session, id string, rec store.ProducerRecord) {
	f.h.Lock()
	defer f.h.Unlock()
	if x := f.h.Get(session); x != nil {
		x.SetProducer(id, rec)
	}
}

// checkProducer is store.checkProducer over a backend: against the
// backend's record (one request, bounded by backendTimeout), for a
// session this node knows.
func (f *fedStore) checkProducer(id string, p *producer.Stamp) error {
	if f.prod == nil {
		return producer.ErrUnsupported
	}
	tok := f.h.RLock()
	_, err := f.local.lookup(id)
	f.h.RUnlock(tok)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), backendTimeout)
	defer cancel()
	st, rev, err := f.prod.ProducerState(ctx, id, p.ID)
	if err != nil {
		return fmt.Errorf("eventbus: producer record from backend: %w", err)
	}
	return checkStamp(id, st, rev != 0, p)
}

// create is store.create over a backend: the creation, reopening or
// attachment is also appended to the backend so every node learns it.
// When a fresh session could not be appended and nothing used it
// meanwhile, no other node learnt of it: it is removed again (and a
// reopened id closed again) rather than kept as a local phantom.
func (f *fedStore) create(id, parent string) error {
	f.h.Lock()
	defer f.h.Unlock()
	x, fresh, reopened, err := f.local.createLocked(id, parent)
	if err != nil || x == nil {
		return err
	}
	path, now := x.Path(), f.local.now()
	f.h.Unlock()
	_, err = f.append(path, Event{Session: x.ID, Type: typeSessionCreated, Time: now})
	f.h.Lock()
	if fresh && err != nil && !f.h.Closed() && f.h.Get(x.ID) == x && x.Subscribers() == 0 && !x.Published() && x.NumChildren() == 0 {
		f.h.Discard(x)
		if reopened {
			f.h.Tombstone(x.ID, f.local.nowNanos())
		}
	}
	return err
}

// closeSession is store.closeSession over a backend: a session_closed
// event is appended for each target, in order; every node, this one
// included, closes the session when its feed ingests it.
func (f *fedStore) closeSession(id string, cascade bool) error {
	type job struct {
		path  []string
		id    string
		turns []string // its active turns, ended before it closes
	}
	f.h.Lock()
	if f.h.Closed() {
		f.h.Unlock()
		return ErrClosed
	}
	x := f.h.Get(id)
	if x == nil {
		f.h.Unlock()
		return nil
	}
	targets := closeTargets(x, cascade)
	jobs := make([]job, len(targets))
	for i, y := range targets {
		jobs[i] = job{path: y.Path(), id: y.ID}
		for _, c := range y.ActiveTurns(false, nil) {
			jobs[i].turns = append(jobs[i].turns, c.Turn.ID)
		}
	}
	f.h.Unlock()
	for _, j := range jobs {
		for _, turn := range j.turns {
			end := Event{Session: j.id, Type: frame.TypeTurnEnd, Time: f.local.now(),
				Data: mustJSON(frame.TurnData{Turn: turn, Reason: frame.ReasonCancelled, Message: "session closed"})}
			if _, err := f.append(j.path, end); err != nil {
				return err
			}
		}
		ev := Event{Session: j.id, Type: frame.TypeSessionClosed, Time: f.local.now(),
			Data: mustJSON(frame.SessionClosedData{Session: j.id, Reason: "closed"})}
		if _, err := f.append(j.path, ev); err != nil {
			return err
		}
	}
	return nil
}

// feedWaiter is a Subscribe waiting until the feed has ingested upTo.
type feedWaiter struct {
	upTo uint64
	ch   chan struct{}
}

// await is store.await over a backend: it returns once this node has
// ingested up to cursor (or the backend's last id, if lower: Syncer), ctx
// is done, the bus closes or backendTimeout passes. It returns at once for
// a cursor below the next id, and with LastID's error, wrapped in
// ErrBackend, when the backend cannot say its last id (a node cut off from
// its backend): Subscribe fails then, rather than answer epoch_reset to a
// cursor that may well be valid.
func (f *fedStore) await(ctx context.Context, cursor uint64) error {
	f.h.Lock()
	behind := !f.h.Closed() && cursor > f.h.LastID()
	f.h.Unlock()
	if !behind {
		return nil
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	target := cursor
	if sy, ok := f.be.(backend.Syncer); ok {
		last, err := sy.LastID(ctx)
		if err != nil && caller.Err() != nil {
			return caller.Err() // the subscriber went away
		}
		if err != nil {
			return fmt.Errorf("%w: cursor %d is past this node's last id %d, and the backend cannot say how far behind it is: %w",
				ErrBackend, cursor, f.h.LastID(), err)
		}
		target = min(target, last)
	}
	w := feedWaiter{upTo: target, ch: make(chan struct{})}
	f.h.Lock()
	if f.h.Closed() || target <= f.h.LastID() {
		f.h.Unlock()
		return nil
	}
	f.waiters = append(f.waiters, w)
	f.h.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	case <-f.stop:
	}
	f.h.Lock()
	f.waiters = slices.DeleteFunc(f.waiters, func(x feedWaiter) bool { return x.ch == w.ch })
	f.h.Unlock()
	return nil
}

// wakeWaitersLocked releases the waiters the feed has caught up with. The
// structure lock is held exclusively.
func (f *fedStore) wakeWaitersLocked() {
	if len(f.waiters) == 0 {
		return
	}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.upTo <= f.h.LastID() {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(f.waiters[len(kept):])
	f.waiters = kept
}

// horizon is the next id: the feed's, or past what the backend
// acknowledged to this node when the feed is behind.
func (f *fedStore) horizon() uint64 { return max(f.h.LastID()+1, f.highWater.Load()+1) }

// pipeline returns f when its backend keeps appends in flight.
func (f *fedStore) pipeline() *fedStore {
	if f.async == nil {
		return nil
	}
	return f
}

// shutdown closes the backend.
func (f *fedStore) shutdown() error { return f.be.Close() }

// Ingest is Feed.Ingest: the record is appended and delivered as in
// memory, under the structure lock (the feed ingests one record at a
// time), its id the backend's.
func (f *fedStore) Ingest(path []string, ev backend.Record) {
	if len(path) == 0 {
		return
	}
	defer f.local.idx.flush() // after the lock is released
	media := f.mediaOf(path, &ev)
	// Subscribers are woken once the lock is released, as on the in-memory
	// publish path: the publishers of this node wait for it meanwhile.
	fn := newFan()
	defer fn.release()
	f.h.Lock()
	defer f.h.Unlock()
	defer f.wakeWaitersLocked()
	if f.h.Closed() || ev.ID <= f.h.LastID() {
		return
	}
	f.h.SetLastID(ev.ID - 1) // appendLocked takes this id
	if ev.Type == frame.TypeSessionClosed && f.h.Tombstoned(path[len(path)-1]) {
		f.h.SetLastID(ev.ID) // closed twice (two nodes at once): once is enough
		return
	}
	x := f.ensurePath(path)
	if x == nil || ev.Type == typeSessionCreated {
		f.h.SetLastID(ev.ID)
		return
	}
	r := &record{Session: x.ID, Type: ev.Type, Data: ev.Data, Ext: extOf(ev.Origin, media), Nanos: ev.Time.UnixNano()}
	if ev.Type == frame.TypeSessionClosed {
		f.local.appendLocked(x, r, true, &fan{}) // wakes at once, as closeLocked does
		f.h.Tombstone(x.ID, r.Nanos)
		f.local.tk.sessionGone(x)
		f.local.closeLocked(x, false)
		return
	}
	if store.IsTurnType(ev.Type) {
		// Checked against the turn state as a local write is: a record
		// the state cannot take (a second turn_end, a turn_start while
		// another turn is active) is not stored, on every node alike.
		if x.CheckTurn(r) != store.TurnOK {
			f.h.SetLastID(ev.ID)
			return
		}
		f.local.appendLocked(x, r, false, &fn)
		f.local.applyTurnLocked(x, r, &fn)
		return
	}
	f.local.appendLocked(x, r, false, &fn)
}

// mediaOf returns the interned media type of r. One this process cannot
// intern (it already knows 4,096; or another node stored one this one
// finds malformed) does not drop the event: it becomes
// application/octet-stream, interned at startup, with its bytes kept, and a
// warning goes to Options.Logger: the type is lost on this node only
// (docs/guarantees.md). No lock is held.
func (f *fedStore) mediaOf(path []string, r *backend.Record) uint32 {
	if r.ContentType == "" {
		return 0
	}
	m, err := internMedia(r.ContentType)
	if err != nil {
		if lg := f.local.idx.logger; lg != nil {
			lg.Warn("eventbus: delivering a byte event as application/octet-stream: its media type cannot be interned here",
				slog.Uint64("id", r.ID), slog.String("session", path[len(path)-1]), slog.Any("err", err))
		}
		m, _ = internMedia(octetStream) // interned at startup: never fails
	}
	return m
}

// Evicted is Feed.Evicted.
func (f *fedStore) Evicted(path []string, upTo uint64) {
	f.h.Lock()
	defer f.h.Unlock()
	if f.h.Closed() || len(path) == 0 {
		return
	}
	if x := f.ensurePath(path); x != nil {
		x.MarkEvicted(upTo)
		if upTo > f.h.LastID() {
			f.local.idx.gap(x, upTo)
		}
	}
}

// Fail is Feed.Fail.
func (f *fedStore) Fail(err error) {
	f.h.Lock()
	var subs []*Subscription
	f.local.idx.each(f.h, func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		f.local.idx.unregister(s)
	}
	f.h.Unlock()
	for _, s := range subs {
		s.end(fmt.Errorf("%w: %w", ErrBackend, err), false)
	}
}

// ensurePath returns the session at the end of path, creating missing
// sessions along it with their parents; closed ancestors are skipped, and
// a closed final session is opened again (see the comment inside). It
// returns nil only when a session cannot be created. The structure lock is
// held exclusively.
func (f *fedStore) ensurePath(path []string) *session {
	var x *session
	parent := ""
	for i, id := range path {
		if f.h.Tombstoned(id) {
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
			f.h.Untombstone(id)
		}
		if x = f.h.Get(id); x != nil {
			if x.Parent() == nil && parent != "" {
				// Attached late (CreateSession on a root), as in memory.
				_ = f.local.attach(x, parent)
			}
		} else {
			var err error
			if x, err = f.h.Add(id, parent, f.local.nowNanos()); err != nil {
				return nil
			}
		}
		parent = id
	}
	return x
}
