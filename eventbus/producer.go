package eventbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers: the checks of package producer's stamps (see its
// documentation for the rules), made under the lock a publish takes in
// memory, or against the backend's record with a revision check over a
// backend that keeps producers (ProducerBackend).

// WithProducer makes the publish idempotent for the producer stamp p
// (package producer has the rules): checked and recorded against the
// session's state of p.ID under the lock the publish takes, or, over a
// backend that keeps producers ([ProducerBackend], as
// adapters/nats does), against the backend's record, stored with the
// event in one atomic step. A refused publish returns a *producer.Error
// (ErrDuplicate: acknowledged, nothing stored; ErrStaleEpoch;
// ErrSequenceGap) or ErrInvalid; over a backend without producer records,
// and through a [Pipeline] over a backend that pipelines appends,
// producer.ErrUnsupported; and the backend's errors as Publish returns
// them. A session remembers its 1,024 most recently used producers: a
// producer forgotten past them is unknown again, so its next publish is
// refused with ErrSequenceGap (expected 0) unless it is at sequence 0
// (docs/guarantees.md).
func WithProducer(p producer.Stamp) PublishOption {
	return func(o *publishOptions) { o.producer = &p }
}

// remoteProducer is this node's copy of a backend's producer record, as
// it last read or wrote it: a cache that saves the read when the node's
// own producer publishes again, never the authority. A stamp it accepts
// is appended under the backend's revision check (a moved record fails
// the append, and the bus reads it again); a stamp it refuses is checked
// again against a fresh read before the refusal is returned.
type remoteProducer struct {
	st  producer.State
	rev uint64
}

// publishProducer is publish for a publish WithProducer(p): in memory the
// check and the record are made under the lock the publish takes (see
// publishLocal); over a backend that keeps producers, against its record
// (publishRemoteProducer); over any other backend it is refused.
func (b *Bus) publishProducer(sessionID, typ string, raw []byte, media uint32, origin string, create bool, p *producer.Stamp) (Event, error) {
	if err := checkName("producer id", p.ID); err != nil {
		return Event{}, err
	}
	if _, ok := b.w.(memWriter); !ok {
		pr, ok := b.remote.be.(ProducerBackend)
		if !ok {
			return Event{}, producer.ErrUnsupported
		}
		return b.publishRemoteProducer(pr, sessionID, typ, raw, media, origin, create, p)
	}
	defer b.idx.flush() // after every lock is released
	return b.publishLocal(sessionID, typ, raw, media, origin, create, p)
}

// publishRemoteProducer is publishRemote with the producer check: it
// checks p against the record of p.ID (this node's copy, else read from
// the backend) and appends the event with p's record under the backend's
// check that the record is still at the revision checked against; when it
// moved meanwhile (a concurrent publish of the same producer, through any
// node), it reads the record again and checks again, all bounded by
// backendTimeout. A refusal is always made against a fresh read.
func (b *Bus) publishRemoteProducer(pr ProducerBackend, sessionID, typ string, raw []byte, media uint32, origin string, create bool, p *producer.Stamp) (Event, error) {
	path, now, err := b.remoteTarget(sessionID, create)
	if err != nil {
		return Event{}, err
	}
	ev := Event{Session: sessionID, Type: typ, Data: raw, Time: now, Origin: origin, media: media}
	ctx, cancel := context.WithTimeout(context.Background(), backendTimeout)
	defer cancel()
	rec, cached := b.remoteProducerCopy(sessionID, p.ID)
	fresh := !cached
	for {
		if fresh {
			st, rev, err := pr.ProducerState(ctx, sessionID, p.ID)
			if err != nil {
				return Event{}, fmt.Errorf("eventbus: producer record from backend: %w", err)
			}
			rec = remoteProducer{st, rev}
			b.keepRemoteProducer(sessionID, p.ID, rec)
		}
		if err := checkStamp(sessionID, rec.st, rec.rev != 0, p); err != nil {
			if !fresh {
				fresh = true // refuse only on the backend's word
				continue
			}
			return Event{}, err
		}
		id, rev, err := pr.AppendProducer(ctx, path, ev, *p, rec.rev)
		if errors.Is(err, ErrProducerConflict) && ctx.Err() == nil {
			fresh = true
			continue
		}
		var pe *producer.Error
		if errors.As(err, &pe) {
			// The backend knew the event (a concurrent retry, over NATS
			// by its Nats-Msg-Id): name it from the record if it can.
			if st, rev, err := pr.ProducerState(ctx, sessionID, p.ID); err == nil {
				b.keepRemoteProducer(sessionID, p.ID, remoteProducer{st, rev})
				if err := checkStamp(sessionID, st, rev != 0, p); errors.Is(err, producer.ErrDuplicate) {
					return Event{}, err
				}
			}
			return Event{}, pe
		}
		if err != nil {
			return Event{}, fmt.Errorf("eventbus: publish to backend: %w", err)
		}
		b.keepRemoteProducer(sessionID, p.ID, remoteProducer{producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: id}, rev})
		ev.ID = id
		b.noteAcked(id)
		return ev, nil
	}
}

// remoteProducerCopy returns this node's copy of producer id's record in
// session, if it has one.
func (b *Bus) remoteProducerCopy(sessionID, id string) (remoteProducer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.mem.tree.Get(sessionID); n != nil {
		return n.Value.remoteProducers.get(id)
	}
	return remoteProducer{}, false
}

// keepRemoteProducer stores this node's copy of producer id's record in
// session (while the session lives here).
func (b *Bus) keepRemoteProducer(sessionID, id string, rec remoteProducer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.mem.tree.Get(sessionID); n != nil {
		x := n.Value
		if x.remoteProducers == nil {
			x.remoteProducers = new(producerLRU[remoteProducer])
		}
		x.remoteProducers.put(id, rec)
	}
}

// CheckProducer reports what a publish WithProducer(p) to session
// sessionID would meet, without publishing or recording anything: nil (it
// would be stored), a *producer.Error (producer.ErrDuplicate, producer.ErrStaleEpoch,
// producer.ErrSequenceGap) or an ErrInvalid error, as the publish would return
// them. It is for an operation that carries no event but is part of a
// producer's sequence (a Durable Streams close-only request); the caller
// serialises it with the producer's publishes if it needs the answer to
// stay true. In memory it takes the session tree's lock, as a publish
// there does; over a backend that keeps producers it reads the backend's
// record (one request to it, bounded by 10 s). Errors besides: ErrInvalid
// naming a bad session or producer id, ErrSessionNotFound (a session this
// node does not know), ErrSessionClosed, ErrClosed after Close,
// producer.ErrUnsupported over a backend without producer records, the
// backend's errors wrapped.
func (b *Bus) CheckProducer(sessionID string, p producer.Stamp) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("producer id", p.ID); err != nil {
		return err
	}
	var pr ProducerBackend
	if _, ok := b.w.(memWriter); !ok {
		if pr, ok = b.remote.be.(ProducerBackend); !ok {
			return producer.ErrUnsupported
		}
	}
	tok := b.mu.RLock()
	if b.closed {
		b.mu.RUnlock(tok)
		return ErrClosed
	}
	x, ok := b.mem.sessions.Load(sessionID)
	if !ok {
		_, closed := b.mem.tombs[sessionID]
		b.mu.RUnlock(tok)
		if closed {
			return fmt.Errorf("%w: %q", ErrSessionClosed, sessionID)
		}
		return fmt.Errorf("%w: %q", ErrSessionNotFound, sessionID)
	}
	if pr != nil {
		b.mu.RUnlock(tok)
		ctx, cancel := context.WithTimeout(context.Background(), backendTimeout)
		defer cancel()
		st, rev, err := pr.ProducerState(ctx, sessionID, p.ID)
		if err != nil {
			return fmt.Errorf("eventbus: producer record from backend: %w", err)
		}
		return checkStamp(sessionID, st, rev != 0, &p)
	}
	tl := x.treeLock()
	tl.Lock()
	err := x.checkProducer(&p)
	tl.Unlock()
	b.mu.RUnlock(tok)
	return err
}

// checkProducer validates p (nil: no producer, accepted) against session
// x's record, its tree lock or b.mu held: nil to accept.
func (x *session) checkProducer(p *producer.Stamp) error {
	if p == nil {
		return nil
	}
	st, ok := x.producers.get(p.ID)
	return checkStamp(x.id, st, ok, p)
}

// checkStamp validates p against the record st of its producer in session
// (known false: the session has none): nil to accept. The rules are
// package producer's, the same in memory and over a backend.
func checkStamp(session string, st producer.State, known bool, p *producer.Stamp) error {
	switch {
	case !known && p.Seq == 0, known && p.Epoch > st.Epoch && p.Seq == 0:
		return nil
	case !known:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: session, Stamp: *p, Epoch: p.Epoch, Expected: 0}
	case p.Epoch < st.Epoch:
		return &producer.Error{Kind: producer.ErrStaleEpoch, Session: session, Stamp: *p, Epoch: st.Epoch, LastSeq: st.LastSeq}
	case p.Epoch > st.Epoch:
		return invalidf("producer %q of session %q: a new epoch %d must start at sequence 0, not %d", p.ID, session, p.Epoch, p.Seq)
	case p.Seq <= st.LastSeq:
		return &producer.Error{Kind: producer.ErrDuplicate, Session: session, Stamp: *p, Epoch: st.Epoch, LastSeq: st.LastSeq, LastID: st.LastID}
	case p.Seq > st.LastSeq+1:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: session, Stamp: *p, Epoch: st.Epoch, LastSeq: st.LastSeq, Expected: st.LastSeq + 1}
	}
	return nil
}

// commitProducer records p's accepted publish as event id (nil p: none).
func (x *session) commitProducer(p *producer.Stamp, id uint64) {
	if p == nil {
		return
	}
	if x.producers == nil {
		x.producers = new(producerLRU[producer.State])
	}
	x.producers.put(p.ID, producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: id})
}
