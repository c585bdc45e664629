package eventbus

import (
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers: the checks of package producer's stamps (see its
// documentation for the rules), made under the lock a publish takes in
// memory, or against the backend's record with a revision check over a
// backend that keeps producers (ProducerBackend).

// WithProducer makes the publish idempotent for stamp p (package producer
// has the rules), checked atomically with the store: in memory, or against a
// [ProducerBackend]'s record. A refused publish returns a *producer.Error
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
