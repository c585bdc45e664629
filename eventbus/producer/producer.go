package producer

import (
	"errors"
	"fmt"
)

// Stamp identifies one publish of an idempotent producer. A Stamp is a
// plain value, safe to copy and share.
type Stamp struct {
	ID    string // the producer's stable id; non-empty, at most frame.MaxNameLen bytes
	Epoch uint64 // raised on every restart of the producer
	Seq   uint64 // 0, 1, 2, … within an epoch
}

// State is a session's record of one producer: what a [Stamp] is checked
// against. The in-memory bus keeps it with the session; a bus over a
// backend that keeps producers (backend.ProducerBackend: over NATS
// JetStream, one subject per producer and session) reads it from there. A
// plain value, safe to copy and share.
type State struct {
	Epoch   uint64 // the epoch in force
	LastSeq uint64 // the highest sequence accepted in Epoch
	LastID  uint64 // the id of the event that accepted LastSeq
}

// Producer outcomes, matched with errors.Is on an [*Error].
var (
	// ErrDuplicate: the publish repeats one already accepted; nothing was
	// stored. Not a failure: the retry is acknowledged.
	ErrDuplicate = errors.New("eventbus: duplicate producer publish")
	// ErrStaleEpoch: the producer's epoch is below the one in force.
	ErrStaleEpoch = errors.New("eventbus: stale producer epoch")
	// ErrSequenceGap: the sequence skips past the next expected one.
	ErrSequenceGap = errors.New("eventbus: producer sequence gap")
)

// Error reports a producer publish the bus did not store. Kind is
// ErrDuplicate, ErrStaleEpoch or ErrSequenceGap; errors.Is matches it. The
// embedded State is the producer's record the stamp met: for ErrStaleEpoch
// its Epoch fences the stamp, for ErrDuplicate its LastID names the event
// that accepted LastSeq.
type Error struct {
	Kind    error
	Session string // the session published to
	Stamp   Stamp  // the stamp the refused publish carried
	State
	// Expected is the sequence the bus expects next (ErrSequenceGap).
	Expected uint64
}

// Error names the session, the producer and what was wrong.
func (e *Error) Error() string {
	p := e.Stamp
	switch e.Kind {
	case ErrStaleEpoch:
		return fmt.Sprintf("eventbus: stale producer epoch: producer %q of session %q sent epoch %d, epoch %d is in force", p.ID, e.Session, p.Epoch, e.Epoch)
	case ErrSequenceGap:
		return fmt.Sprintf("eventbus: producer sequence gap: producer %q of session %q sent sequence %d, expected %d", p.ID, e.Session, p.Seq, e.Expected)
	}
	return fmt.Sprintf("eventbus: duplicate producer publish: producer %q of session %q sent epoch %d sequence %d, already accepted up to %d (event %d)", p.ID, e.Session, p.Epoch, p.Seq, e.LastSeq, e.LastID)
}

// Is makes errors.Is(err, e.Kind) true.
func (e *Error) Is(target error) bool { return target == e.Kind }

// ErrUnsupported: a publish eventbus.WithProducer (or Bus.CheckProducer)
// that the bus cannot check, so refuses rather than stores unchecked: on a
// bus over a backend that keeps no producer records (one without
// backend.ProducerBackend, or adapters/nats on a NATS server
// without atomic batch publish), and through an eventbus.Pipeline over a
// backend that pipelines appends (publish the stamped event with
// Bus.Publish instead). errors.Is(err, errors.ErrUnsupported) holds.
var ErrUnsupported = fmt.Errorf("eventbus: idempotent producers are not supported here: %w", errors.ErrUnsupported)
