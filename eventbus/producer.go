package eventbus

import (
	"errors"
	"fmt"
)

// Idempotent producers (Kafka's idempotent producer; Durable Streams'
// Producer-Id, Producer-Epoch and Producer-Seq): a publish may carry the
// id of the producer that makes it, the producer's epoch (raised when it
// restarts) and a sequence number (0, 1, 2, … within an epoch). The bus
// checks it against the session's record of that producer under the lock
// the publish takes anyway, and records the accepted one in the same step,
// so a check and its event are one atomic step:
//
//   - a retry of an accepted publish (a sequence at or below the last
//     accepted, same epoch) stores nothing and returns a *ProducerError
//     that errors.Is ErrDuplicate, with the id of the last accepted event:
//     acknowledged, once;
//   - an epoch below the one in force is refused (ErrStaleEpoch): a zombie
//     producer is fenced after its replacement published;
//   - a sequence past the next is refused (ErrSequenceGap), naming the
//     expected one;
//   - a higher epoch starts at sequence 0 (else ErrInvalid).
//
// The record lives with the session (memory: one small entry per producer
// id, kept until the session is closed or expires).

// Producer identifies one publish of an idempotent producer.
type Producer struct {
	ID    string // the producer's stable id; non-empty, at most frame.MaxNameLen bytes
	Epoch uint64 // raised on every restart of the producer
	Seq   uint64 // 0, 1, 2, … within an epoch
}

// WithProducer makes the publish idempotent for producer p (see
// [Producer]): checked and recorded against the session's state of p.ID.
func WithProducer(p Producer) PublishOption {
	return func(o *publishOptions) { o.producer = &p }
}

// Producer outcomes, matched with errors.Is on a [*ProducerError].
var (
	// ErrDuplicate: the publish repeats one already accepted; nothing was
	// stored. Not a failure: the retry is acknowledged.
	ErrDuplicate = errors.New("eventbus: duplicate producer publish")
	// ErrStaleEpoch: the producer's epoch is below the one in force.
	ErrStaleEpoch = errors.New("eventbus: stale producer epoch")
	// ErrSequenceGap: the sequence skips past the next expected one.
	ErrSequenceGap = errors.New("eventbus: producer sequence gap")
)

// ProducerError reports a producer publish the bus did not store. Kind is
// ErrDuplicate, ErrStaleEpoch or ErrSequenceGap; errors.Is matches it.
type ProducerError struct {
	Kind     error
	Session  string // the session published to
	Producer Producer
	// Epoch is the epoch in force for the producer (for ErrStaleEpoch the
	// one that fences it).
	Epoch uint64
	// LastSeq is the highest sequence accepted in Epoch.
	LastSeq uint64
	// Expected is the sequence the bus expects next (ErrSequenceGap).
	Expected uint64
	// LastID is the id of the event that accepted LastSeq (ErrDuplicate).
	LastID uint64
}

// Error names the session, the producer and what was wrong.
func (e *ProducerError) Error() string {
	p := e.Producer
	switch e.Kind {
	case ErrStaleEpoch:
		return fmt.Sprintf("eventbus: stale producer epoch: producer %q of session %q sent epoch %d, epoch %d is in force", p.ID, e.Session, p.Epoch, e.Epoch)
	case ErrSequenceGap:
		return fmt.Sprintf("eventbus: producer sequence gap: producer %q of session %q sent sequence %d, expected %d", p.ID, e.Session, p.Seq, e.Expected)
	}
	return fmt.Sprintf("eventbus: duplicate producer publish: producer %q of session %q sent epoch %d sequence %d, already accepted up to %d (event %d)", p.ID, e.Session, p.Epoch, p.Seq, e.LastSeq, e.LastID)
}

// Is makes errors.Is(err, e.Kind) true.
func (e *ProducerError) Is(target error) bool { return target == e.Kind }

// producerState is a session's record of one producer.
type producerState struct {
	epoch, lastSeq, lastID uint64
}

// ErrProducerUnsupported: a publish WithProducer (or CheckProducer) on a bus
// over a backend, where idempotent producers are not supported yet.
// errors.Is(err, errors.ErrUnsupported) holds.
var ErrProducerUnsupported = fmt.Errorf("eventbus: idempotent producers are not supported on a bus over a backend yet: %w", errors.ErrUnsupported)

// publishProducer is publish for a publish WithProducer(p): in memory the
// check and the record are made under the lock the publish takes (see
// publishLocal); over a backend it is refused.
func (b *Bus) publishProducer(sessionID, typ string, raw []byte, origin string, create bool, p *Producer) (Event, error) {
	if err := checkName("producer id", p.ID); err != nil {
		return Event{}, err
	}
	if _, ok := b.w.(memWriter); !ok {
		return Event{}, ErrProducerUnsupported
	}
	defer b.flushDiagnostics() // after every lock is released
	return b.publishLocal(sessionID, typ, raw, origin, create, p)
}

// CheckProducer reports what a publish WithProducer(p) to session
// sessionID would meet, without publishing or recording anything: nil (it
// would be stored), a *ProducerError (ErrDuplicate, ErrStaleEpoch,
// ErrSequenceGap) or an ErrInvalid error, as the publish would return
// them. It is for an operation that carries no event but is part of a
// producer's sequence (a Durable Streams close-only request); the caller
// serialises it with the producer's publishes if it needs the answer to
// stay true. It takes the session tree's lock, as a publish there does.
// Errors besides: ErrInvalid naming a bad session or producer id,
// ErrSessionNotFound, ErrSessionClosed, ErrClosed after Close,
// ErrProducerUnsupported over a backend.
func (b *Bus) CheckProducer(sessionID string, p Producer) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("producer id", p.ID); err != nil {
		return err
	}
	if _, ok := b.w.(memWriter); !ok {
		return ErrProducerUnsupported
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
func (x *session) checkProducer(p *Producer) error {
	if p == nil {
		return nil
	}
	st, ok := x.producers[p.ID]
	switch {
	case !ok && p.Seq == 0, ok && p.Epoch > st.epoch && p.Seq == 0:
		return nil
	case !ok:
		return &ProducerError{Kind: ErrSequenceGap, Session: x.id, Producer: *p, Epoch: p.Epoch, Expected: 0}
	case p.Epoch < st.epoch:
		return &ProducerError{Kind: ErrStaleEpoch, Session: x.id, Producer: *p, Epoch: st.epoch, LastSeq: st.lastSeq}
	case p.Epoch > st.epoch:
		return invalidf("producer %q of session %q: a new epoch %d must start at sequence 0, not %d", p.ID, x.id, p.Epoch, p.Seq)
	case p.Seq <= st.lastSeq:
		return &ProducerError{Kind: ErrDuplicate, Session: x.id, Producer: *p, Epoch: st.epoch, LastSeq: st.lastSeq, LastID: st.lastID}
	case p.Seq > st.lastSeq+1:
		return &ProducerError{Kind: ErrSequenceGap, Session: x.id, Producer: *p, Epoch: st.epoch, LastSeq: st.lastSeq, Expected: st.lastSeq + 1}
	}
	return nil
}

// commitProducer records p's accepted publish as event id (nil p: none).
func (x *session) commitProducer(p *Producer, id uint64) {
	if p == nil {
		return
	}
	if x.producers == nil {
		x.producers = make(map[string]producerState)
	}
	x.producers[p.ID] = producerState{epoch: p.Epoch, lastSeq: p.Seq, lastID: id}
}
