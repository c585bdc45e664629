package eventbus

// The publish side of the delivery protocol, in call order: Publish and
// PublishJSON validate and encode outside any lock; publish hands the
// event to the bus's writer (store.go: memWriter in memory, the backend's
// remoteStore, whose feed comes back through ingest); appendLocked, under
// the session's tree lock, takes the id, appends to the session's Log and
// offers the event to every subscriber in scope (index.fanOut, index.go;
// each subscriber's queue applies its limits and policy, flow.go). Parked
// consumers are woken after every lock is released (fan.release).
//
// # Lock order
//
// Every lock of the bus, in the order a goroutine may take them (this file
// takes the first four on every publish; subscribe.go, session.go,
// index.go and wait.go take the same ones in the same order):
//
//  1. Bus.mu, the structure lock (reader-biased): its read side for a
//     publish to an existing session, a tree-scoped subscribe or
//     unsubscribe; exclusively for structural changes (create, close,
//     expiry, an "all" subscribe, Close, the backend's feed). Whoever
//     holds it exclusively needs no other bus lock.
//  2. the tree lock (session.treeLock: the root's tmu), under the read
//     side only; a goroutine holds at most one.
//  3. index.all.mu, the ordering step, only while an "all" subscriber
//     exists (index.all.n > 0), or for an "all" subscriber's unsubscribe.
//  4. Subscription.mu, one subscriber's queue, for one delivery at a time.
//  5. the deadline queue's own lock (internal/deadline), under
//     Subscription.mu when a reader parks or ends; the queue releases it
//     before it calls back (Bus.deadlineDue), which takes 4.
//
// Beside the chain: Bus.mu (exclusive) → registry.treeMu for the tree's
// parent links (registry.go); the diagnostics aggregator's own lock
// (internal/diag) is taken under any of 1–4 and takes none. Nobody takes
// the read side of Bus.mu twice (a waiting exclusive locker would block
// the second); the consumer takes no bus lock to read; a publisher never
// waits on a consumer; wake-ups and diagnostics are delivered after every
// lock is released.

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// encode turns a payload into JSON once, outside the lock.
func encode(data any) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = invalidf("encoding data of type %T panicked: %v", data, p)
		}
	}()
	switch v := data.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !validJSON(v) {
			return nil, invalidJSON("", v)
		}
		return append([]byte(nil), v...), nil
	}
	out, err = json.Marshal(data)
	if err != nil {
		return nil, invalidf("cannot encode data of type %T: %v", data, err)
	}
	// json.Marshal turns invalid UTF-8 in a Go string into U+FFFD, but
	// passes through what a json.Marshaler or a nested json.RawMessage
	// gives.
	if !utf8.Valid(out) {
		return nil, invalidJSON(fmt.Sprintf(" (encoding data of type %T)", data), out)
	}
	return out, nil
}

// Publish stores an event of type typ with payload data in session's replay
// buffer and queues it for every subscriber whose scope covers the session
// (AgentPool's publish; qwen-code's "publish is always safe to call").
//
// data is encoded to JSON once and shared (a json.RawMessage is validated
// — accepted when encoding/json's json.Valid accepts it and it is UTF-8
// (RFC 8259 §8.1) — and copied as is; nil means no payload; whatever a
// json.Marshaler or a nested json.RawMessage gives must be UTF-8 too). The session is created if it
// does not exist (AgentPool's create-on-first-publish) — as a root, or under
// the parent the [Options.SessionController] names — unless [Existing] is given.
// It returns the stored Event with its id, from one bus-wide sequence that
// starts at 1.
//
// It never blocks on a subscriber and never panics. It waits only for
// what touches the same session tree (another publish there, a tree-scoped
// subscribe or unsubscribe there), for structural changes (CreateSession,
// CloseSession, expiry, an "all" Subscribe, Close, a session created by a
// publish) and, while an "all" subscriber exists, for the moment another
// publish takes its id; publishes to distinct trees run in parallel.
// Errors: an ErrInvalid
// error naming the value for an empty or over-long session id or type, a
// type with a control character (CR, LF, …), a [frame.Reserved] type (the bus's
// own frames: use CloseSession for session_closed), data that cannot be
// encoded, or a [Options.SessionController] that panicked creating the session —
// a refused event consumes no id; ErrSessionClosed for a closed session
// that was not reopened; ErrSessionNotFound for an unknown session with
// [Existing]; ErrClosed after [Bus.Close].
func (b *Bus) Publish(sessionID, typ string, data any, opts ...PublishOption) (Event, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, err
	}
	origin, create, p := publishOpts(opts)
	if p != nil {
		return b.publishProducer(sessionID, typ, raw, 0, origin, create, p)
	}
	return b.publish(sessionID, typ, raw, 0, origin, create)
}

// PublishJSON is [Bus.Publish] for a payload that is already JSON: data is
// validated (accepted when encoding/json's json.Valid accepts it and it is
// UTF-8) and copied, as Publish does with a json.RawMessage, but without passing
// through an interface value, which costs Publish an allocation per call.
// Empty data means no payload. Errors and behaviour are Publish's; data is
// not retained.
func (b *Bus) PublishJSON(sessionID, typ string, data []byte, opts ...PublishOption) (Event, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	var raw []byte
	if len(data) > 0 {
		if !validJSON(data) {
			return Event{}, invalidJSON("", data)
		}
		raw = append([]byte(nil), data...)
	}
	origin, create, p := publishOpts(opts)
	if p != nil {
		return b.publishProducer(sessionID, typ, raw, 0, origin, create, p)
	}
	return b.publish(sessionID, typ, raw, 0, origin, create)
}

// checkEvent validates what every publish names.
func checkEvent(sessionID, typ string) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("event type", typ); err != nil {
		return err
	}
	if frame.Reserved(typ) {
		return invalidf("event type %q is reserved for the bus's own frames", typ)
	}
	return nil
}

// publishOpts applies opts (nil ones ignored) and returns the origin and
// whether a missing session is created.
func publishOpts(opts []PublishOption) (origin string, create bool, p *producer.Stamp) {
	if len(opts) == 0 {
		return "", true, nil
	}
	// Declared here so that it moves to the heap (o(&po) makes it escape)
	// only for a publish that has options.
	var po publishOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	return po.origin, !po.existing, po.producer
}

// testHookTreeLocked, when set by a test, runs in appendLocked right after
// the id is taken (and the "all" subscribers were offered the event),
// before the ring append and the tree's fan-out: on the publish path of an
// existing session that is inside the tree-locked section (read side of
// b.mu and the tree lock held). It gets the session id. Set it only while
// no other test publishes.
var testHookTreeLocked func(session string)

// publish stores and fans out one validated, encoded event. Only what must
// be ordered runs under a lock — the id, the replay buffer append and
// queueing for the subscribers in scope; the record, the clock and the
// returned Event are made outside it, and parked consumers are woken after
// it is released.
//
// An existing session (the common case) is published to under the read
// side of the structure lock and its tree's lock: publishers of distinct
// trees do not wait for each other. A session that must be created first
// (or a refused one) takes the structure lock exclusively.
func (b *Bus) publish(sessionID, typ string, raw []byte, media uint32, origin string, create bool) (Event, error) {
	defer b.idx.flush() // after every lock is released
	return b.w.publish(b, sessionID, typ, raw, media, origin, create)
}

// publishLocal is publish on the in-memory bus (memWriter): the id is
// taken here, under the tree lock, as the event is appended and fanned out.
// media is the interned media type (media.go), 0 for JSON.
func (b *Bus) publishLocal(sessionID, typ string, raw []byte, media uint32, origin string, create bool, p *producer.Stamp) (Event, error) {
	r := &record{Type: typ, Data: raw, Ext: extOf(origin, media), Nanos: b.nowNanos()}
	f := newFan()
	defer f.release() // the wake-ups, once no lock is held
	tok := b.mu.RLock()
	if b.closed {
		b.mu.RUnlock(tok)
		return Event{}, ErrClosed
	}
	if x, ok := b.mem.sessions.Load(sessionID); ok {
		tl := x.treeLock()
		tl.Lock()
		if err := x.checkProducer(p); err != nil {
			tl.Unlock()
			b.mu.RUnlock(tok)
			return Event{}, err
		}
		r.Session = x.id
		b.appendLocked(x, r, false, &f)
		x.commitProducer(p, r.ID)
		tl.Unlock()
		b.mu.RUnlock(tok)
		// r is immutable from here on: subscribers read it concurrently.
		return eventOf(r, false), nil
	}
	b.mu.RUnlock(tok)
	// Unknown here: create it (or refuse) with the structure held.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Event{}, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, create)
	if err == nil {
		err = x.checkProducer(p)
	}
	if err != nil {
		b.mu.Unlock()
		return Event{}, err
	}
	r.Session = x.id
	b.appendLocked(x, r, false, &f)
	x.commitProducer(p, r.ID)
	b.mu.Unlock()
	return eventOf(r, false), nil
}

// publishRemote is publish on a bus over a backend: the backend assigns the
// id and the feed delivers.
func (b *Bus) publishRemote(sessionID, typ string, raw []byte, media uint32, origin string, create bool) (Event, error) {
	path, now, err := b.remoteTarget(sessionID, create)
	if err != nil {
		return Event{}, err
	}
	return b.appendRemote(path, Event{Session: sessionID, Type: typ, Data: raw, Time: now, Origin: origin, media: media})
}

// remoteTarget is the first half of a publish over a backend: under the
// lock, the session (created if new and create, as Publish creates it;
// marked published, so that a CreateSession on this node can no longer
// give it a parent, as in memory) and its tree path, and the event's time.
// A closed session is refused as in memory.
func (b *Bus) remoteTarget(sessionID string, create bool) ([]string, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, time.Time{}, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, create)
	if err != nil {
		return nil, time.Time{}, err
	}
	x.published = true
	return x.pathLocked(), b.cfg.now(), nil
}

// appendLocked assigns the next id, stores r in x's replay buffer and fans
// it out; f collects the wake-ups (see [fan]). The caller holds b.mu's read
// side and x's tree lock, or b.mu exclusively.
//
// The id is taken here, under the tree lock, so ids rise in the order
// events are appended within every tree (and so within every replay buffer
// and every tree-scoped subscriber's queue). While an "all" subscriber
// exists, the id is taken and the event offered to the "all" subscribers
// under index.all.mu, the one bus-wide step: every "all" subscriber then sees the
// ids of all trees in rising order, with nothing missing below the newest,
// so one cursor resumes it. The tree's own fan-out follows outside it.
func (b *Bus) appendLocked(x *session, r *record, forced bool, f *fan) {
	ix := &b.idx
	droppable := false
	if ix.droppable != nil {
		_, droppable = ix.droppable[r.Type]
	}
	if ix.all.n.Load() > 0 {
		ix.all.mu.Lock()
		r.ID = b.hot.seq.Add(1)
		ix.offer(&ix.all.list, nil, r, droppable, forced, f)
		ix.all.mu.Unlock()
	} else {
		r.ID = b.hot.seq.Add(1)
	}
	if testHookTreeLocked != nil {
		testHookTreeLocked(x.id)
	}
	x.published = true
	x.lastID = r.ID
	x.touch(r.Nanos)
	x.ring.Append(r)
	if n := int64(len(r.Data)); n > b.mem.maxData.Load() {
		b.raiseMaxData(n)
	}
	x.info.lastID.Store(r.ID)
	if n := int32(x.ring.Len()); n != x.info.buffered.Load() {
		x.info.buffered.Store(n)
	}
	b.hot.published.Add(1)
	ix.fanOut(x, r, droppable, forced, f)
	if f.delivered != 0 {
		b.hot.delivered.Add(uint64(f.delivered))
	}
	f.delivered = 0
}
