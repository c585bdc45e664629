package eventbus

// The publish side of the delivery protocol, in call order: Publish,
// PublishJSON and PublishBytes validate and encode outside any lock and
// make the record; the bus's store takes it (store.go). In memory,
// memStore.publish takes the locks, checks a producer's stamp, and
// appendLocked, under the session's tree lock, takes the id, appends to
// the session's log (package internal/store) and offers the event to every
// subscriber in scope (index.fanOut, index.go; each subscriber's queue
// applies its limits and policy, flow.go). Over a backend, fedStore.publish
// appends to the backend and the feed comes back through the same
// appendLocked (fed.go: Ingest). Parked consumers are woken after every
// lock is released (fan.release).
//
// # Lock order
//
// Every lock of the bus, in the order a goroutine may take them (this file
// takes the first four on every publish; subscribe.go, session.go,
// store.go, fed.go, index.go and wait.go take the same ones in the same
// order):
//
//  1. the structure lock (History.Lock/RLock, reader-biased): its read
//     side for a publish to an existing session, a tree-scoped subscribe
//     or unsubscribe; exclusively for structural changes (create, close,
//     expiry, an "all" subscribe, Close, the backend's feed). Whoever
//     holds it exclusively needs no other bus lock.
//  2. the tree lock (Session.TreeLock: the root's), under the read side
//     only; a goroutine holds at most one.
//  3. index.all.mu, the ordering step, only while an "all" subscriber
//     exists (index.all.n > 0), or for an "all" subscriber's unsubscribe.
//  4. Subscription.mu, one subscriber's locked queue, for one delivery at a
//     time — a delivery near a limit or with a full lane; one away from
//     every limit fills the subscriber's lane under 2 or 3 alone
//     (queue.Queue.DeliverLockFree).
//  5. the deadline queue's own lock (internal/deadline), under
//     Subscription.mu when a reader parks or ends; the queue releases it
//     before it calls back (Bus.deadlineDue), which takes 4.
//
// Beside the chain: the structure lock (exclusive) → the history's lock of
// the tree's parent links, which listings read (internal/store); the
// diagnostics aggregator's own lock (internal/diag) is taken under any of
// 1–4 and takes none; a session's presence lock (presence.go) is taken
// under 1–3 or alone, and takes only 4 (a listener's frame) and the
// presence hub's own lock. Nobody takes the read side of the structure lock
// twice (a waiting exclusive locker would block the second); the consumer
// takes no bus lock to read; a publisher never waits on a consumer;
// wake-ups and diagnostics are delivered after every lock is released.

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
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

// Publish stores an event of type typ with payload data (encoded to JSON
// once; a json.RawMessage is validated and copied; nil is no payload) in the
// session's replay buffer, queues it for every subscriber in scope and
// returns it with its id. The session is created unless [Existing] is given.
// It never blocks on a subscriber; it waits only for work on the same
// session tree and for structural changes. Errors: ErrInvalid naming the bad
// value (no id consumed), ErrSessionClosed, ErrSessionNotFound, ErrClosed.
func (b *Bus) Publish(sessionID, typ string, data any, opts ...PublishOption) (Event, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, err
	}
	return b.publish(sessionID, typ, raw, 0, opts)
}

// PublishJSON is [Bus.Publish] for data that is already JSON, without the
// allocation of an interface value. Empty data is no payload; data is
// copied. Errors are Publish's.
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
	return b.publish(sessionID, typ, raw, 0, opts)
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

// checkName refuses a bad session id or event type (frame.CheckName) with
// an ErrInvalid error: "eventbus: invalid argument: " and frame's text.
func checkName(what, v string) error {
	if err := frame.CheckName(what, v); err != nil {
		return invalidf("%v", err)
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
// before the append and the tree's fan-out: on the publish path of an
// existing session that is inside the tree-locked section (the structure
// lock's read side and the tree lock held). It gets the session id. Set
// it only while no other test publishes.
var testHookTreeLocked func(session string)

// publish stores and delivers one validated, encoded event (Publish,
// PublishJSON, PublishBytes; media is the interned media type, 0 for
// JSON): the record and the clock are made here, outside any lock, and
// the bus's store (store.go) does the rest.
func (b *Bus) publish(sessionID, typ string, raw []byte, media uint32, opts []PublishOption) (Event, error) {
	origin, create, p := publishOpts(opts)
	if p != nil {
		if err := checkName("producer id", p.ID); err != nil {
			return Event{}, err
		}
	}
	r := &record{Type: typ, Data: raw, Ext: extOf(origin, media), Nanos: b.cfg.now().UnixNano()}
	defer b.idx.flush() // after every lock is released
	return b.st.publish(sessionID, r, create, p)
}

// publish is store.publish in memory. Only what must be ordered runs under
// a lock — the producer check, the id, the append and the queueing for the
// subscribers in scope (appendLocked); parked consumers are woken after it
// is released. An existing session (the common case) is published to
// under the structure lock's read side and its tree's lock: publishers of
// distinct trees do not wait for each other. A session that must be
// created first (or a refused one) takes the structure lock exclusively.
func (m *memStore) publish(id string, r *record, create bool, p *producer.Stamp) (Event, error) {
	f := newFan()
	defer f.release() // the wake-ups, once no lock is held
	tok := m.h.RLock()
	if m.h.Closed() {
		m.h.RUnlock(tok)
		return Event{}, ErrClosed
	}
	if x, ok := m.h.Lookup(id); ok {
		tl := x.TreeLock()
		tl.Lock()
		if p != nil {
			if err := checkProducer(x, p); err != nil {
				tl.Unlock()
				m.h.RUnlock(tok)
				return Event{}, err
			}
		}
		r.Session = x.ID
		m.appendLocked(x, r, false, &f)
		if p != nil {
			commitProducer(x, p, r.ID)
		}
		tl.Unlock()
		m.h.RUnlock(tok)
		// r is immutable from here on: subscribers read it concurrently.
		return eventOf(r, false), nil
	}
	m.h.RUnlock(tok)
	// Unknown here: create it (or refuse) with the structure held.
	m.h.Lock()
	defer m.h.Unlock()
	if m.h.Closed() {
		return Event{}, ErrClosed
	}
	x, err := m.open(id, create)
	if err == nil {
		err = checkProducer(x, p)
	}
	if err != nil {
		return Event{}, err
	}
	r.Session = x.ID
	m.appendLocked(x, r, false, &f)
	commitProducer(x, p, r.ID)
	return eventOf(r, false), nil
}

// appendLocked takes the next id for r, appends r to x's log and offers
// it to every subscriber in scope; f collects the wake-ups (see [fan]).
// The caller holds the structure lock's read side and x's tree lock, or
// the structure lock exclusively.
//
// The id is taken here, under the tree lock, so ids rise in the order
// events are appended within every tree (and so within every log and
// every tree-scoped subscriber's queue). While an "all" subscriber exists,
// the id is taken and the event offered to the "all" subscribers under
// index.all.mu, the one bus-wide step: every "all" subscriber then sees
// the ids of all trees in rising order, with nothing missing below the
// newest, so one cursor resumes it. The tree's own fan-out follows
// outside it.
func (m *memStore) appendLocked(x *session, r *record, forced bool, f *fan) {
	ix := m.idx
	droppable := false
	if ix.droppable != nil {
		_, droppable = ix.droppable[r.Type]
	}
	if ix.all.n.Load() > 0 {
		ix.all.mu.Lock()
		r.ID = m.h.NextID()
		ix.offer(&ix.all.list, nil, x, r, droppable, forced, f)
		ix.all.mu.Unlock()
	} else {
		r.ID = m.h.NextID()
	}
	if testHookTreeLocked != nil {
		testHookTreeLocked(x.ID)
	}
	m.h.Append(x, r)
	ix.fanOut(x, r, droppable, forced, f)
	if f.delivered != 0 {
		m.h.CountDelivered(f.delivered)
	}
	f.delivered = 0
}

// PublishBytes is [Bus.Publish] for a payload of media type contentType:
// subscribers get data as published, with [Event.ContentType]. Under
// application/json data is validated and published as by PublishJSON. Such
// an event never merges. data is copied. Errors: Publish's, and ErrInvalid
// for a media type that is empty, malformed, over 255 bytes or the 4,097th
// distinct one in the process.
func (b *Bus) PublishBytes(sessionID, typ, contentType string, data []byte, opts ...PublishOption) (Event, error) {
	media, err := internMedia(contentType)
	if err != nil {
		return Event{}, err
	}
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	if media == 0 && len(data) > 0 && !validJSON(data) {
		return Event{}, invalidJSON(fmt.Sprintf(" (media type %q)", contentType), data)
	}
	var raw []byte
	if len(data) > 0 {
		raw = append([]byte(nil), data...)
	}
	return b.publish(sessionID, typ, raw, media, opts)
}

// Idempotent producers: the checks of package producer's stamps (see its
// documentation for the rules), made under the lock a publish takes in
// memory, or against the backend's record with a revision check over a
// backend that keeps producers (backend.ProducerBackend).

// WithProducer makes the publish idempotent for stamp p (package producer
// has the rules), checked atomically with the store: in memory, or against a
// backend.ProducerBackend's record. A refused publish returns a *producer.Error
// (ErrDuplicate, ErrStaleEpoch, ErrSequenceGap), ErrInvalid, or
// producer.ErrUnsupported (a backend without records, or a pipelined one).
// A session remembers its 1,024 most recent producers.
func WithProducer(p producer.Stamp) PublishOption {
	return func(o *publishOptions) { o.producer = &p }
}

// CheckProducer returns what a publish WithProducer(p) to sessionID would
// meet, storing nothing: nil, a *producer.Error, or Publish's errors
// (ErrInvalid, ErrSessionNotFound, ErrSessionClosed, ErrClosed,
// producer.ErrUnsupported, a backend's). Over a backend it reads the
// backend's record, bounded by 10 s.
func (b *Bus) CheckProducer(sessionID string, p producer.Stamp) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("producer id", p.ID); err != nil {
		return err
	}
	return b.st.checkProducer(sessionID, &p)
}

// checkProducer validates p (nil: no producer, accepted) against session
// x's record, under its tree lock or the structure lock: nil to accept.
func checkProducer(x *session, p *producer.Stamp) error {
	if p == nil {
		return nil
	}
	rec, ok := x.Producer(p.ID)
	return checkStamp(x.ID, rec.State, ok, p)
}

// checkStamp validates p against the record st of its producer in session
// (known false: the session has none): nil to accept. The rules are
// package producer's, the same in memory and over a backend.
func checkStamp(session string, st producer.State, known bool, p *producer.Stamp) error {
	switch {
	case !known && p.Seq == 0, known && p.Epoch > st.Epoch && p.Seq == 0:
		return nil
	case !known:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: session, Stamp: *p, Expected: 0, State: producer.State{Epoch: p.Epoch}}
	case p.Epoch < st.Epoch:
		return &producer.Error{Kind: producer.ErrStaleEpoch, Session: session, Stamp: *p, State: producer.State{Epoch: st.Epoch, LastSeq: st.LastSeq}}
	case p.Epoch > st.Epoch:
		return invalidf("producer %q of session %q: a new epoch %d must start at sequence 0, not %d", p.ID, session, p.Epoch, p.Seq)
	case p.Seq <= st.LastSeq:
		return &producer.Error{Kind: producer.ErrDuplicate, Session: session, Stamp: *p, State: producer.State{Epoch: st.Epoch, LastSeq: st.LastSeq, LastID: st.LastID}}
	case p.Seq > st.LastSeq+1:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: session, Stamp: *p, Expected: st.LastSeq + 1, State: producer.State{Epoch: st.Epoch, LastSeq: st.LastSeq}}
	}
	return nil
}

// commitProducer records p's accepted publish as event id (nil p: none).
func commitProducer(x *session, p *producer.Stamp, id uint64) {
	if p == nil {
		return
	}
	x.SetProducer(p.ID, store.ProducerRecord{State: producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: id}})
}
