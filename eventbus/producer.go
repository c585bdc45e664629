package eventbus

import (
	"fmt"

	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers: the checks of package producer's stamps (see its
// documentation for the rules), made under the lock a publish takes.

// WithProducer makes the publish idempotent for the producer stamp p
// (package producer has the rules): checked and recorded against the
// session's state of p.ID under the lock the publish takes. A refused
// publish returns a *producer.Error (ErrDuplicate: acknowledged, nothing
// stored; ErrStaleEpoch; ErrSequenceGap) or ErrInvalid; over a backend
// producer.ErrUnsupported.
func WithProducer(p producer.Stamp) PublishOption {
	return func(o *publishOptions) { o.producer = &p }
}

// producerState is a session's record of one producer.
type producerState struct {
	epoch, lastSeq, lastID uint64
}

// publishProducer is publish for a publish WithProducer(p): in memory the
// check and the record are made under the lock the publish takes (see
// publishLocal); over a backend it is refused.
func (b *Bus) publishProducer(sessionID, typ string, raw []byte, media uint32, origin string, create bool, p *producer.Stamp) (Event, error) {
	if err := checkName("producer id", p.ID); err != nil {
		return Event{}, err
	}
	if _, ok := b.w.(memWriter); !ok {
		return Event{}, producer.ErrUnsupported
	}
	defer b.flushDiagnostics() // after every lock is released
	return b.publishLocal(sessionID, typ, raw, media, origin, create, p)
}

// CheckProducer reports what a publish WithProducer(p) to session
// sessionID would meet, without publishing or recording anything: nil (it
// would be stored), a *producer.Error (producer.ErrDuplicate, producer.ErrStaleEpoch,
// producer.ErrSequenceGap) or an ErrInvalid error, as the publish would return
// them. It is for an operation that carries no event but is part of a
// producer's sequence (a Durable Streams close-only request); the caller
// serialises it with the producer's publishes if it needs the answer to
// stay true. It takes the session tree's lock, as a publish there does.
// Errors besides: ErrInvalid naming a bad session or producer id,
// ErrSessionNotFound, ErrSessionClosed, ErrClosed after Close,
// producer.ErrUnsupported over a backend.
func (b *Bus) CheckProducer(sessionID string, p producer.Stamp) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("producer id", p.ID); err != nil {
		return err
	}
	if _, ok := b.w.(memWriter); !ok {
		return producer.ErrUnsupported
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
	st, ok := x.producers[p.ID]
	switch {
	case !ok && p.Seq == 0, ok && p.Epoch > st.epoch && p.Seq == 0:
		return nil
	case !ok:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: x.id, Stamp: *p, Epoch: p.Epoch, Expected: 0}
	case p.Epoch < st.epoch:
		return &producer.Error{Kind: producer.ErrStaleEpoch, Session: x.id, Stamp: *p, Epoch: st.epoch, LastSeq: st.lastSeq}
	case p.Epoch > st.epoch:
		return invalidf("producer %q of session %q: a new epoch %d must start at sequence 0, not %d", p.ID, x.id, p.Epoch, p.Seq)
	case p.Seq <= st.lastSeq:
		return &producer.Error{Kind: producer.ErrDuplicate, Session: x.id, Stamp: *p, Epoch: st.epoch, LastSeq: st.lastSeq, LastID: st.lastID}
	case p.Seq > st.lastSeq+1:
		return &producer.Error{Kind: producer.ErrSequenceGap, Session: x.id, Stamp: *p, Epoch: st.epoch, LastSeq: st.lastSeq, Expected: st.lastSeq + 1}
	}
	return nil
}

// commitProducer records p's accepted publish as event id (nil p: none).
func (x *session) commitProducer(p *producer.Stamp, id uint64) {
	if p == nil {
		return
	}
	if x.producers == nil {
		x.producers = make(map[string]producerState)
	}
	x.producers[p.ID] = producerState{epoch: p.Epoch, lastSeq: p.Seq, lastID: id}
}
