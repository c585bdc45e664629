package eventbus

import (
	"github.com/replaybus/replaybus/eventbus/internal/store"
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
func commitProducer(x *session, p *producer.Stamp, id uint64) {
	if p == nil {
		return
	}
	x.SetProducer(p.ID, store.ProducerRecord{State: producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: id}})
}
