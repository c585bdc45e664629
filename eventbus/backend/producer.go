package backend

import (
	"context"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/internal/hook"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// ErrProducerConflict is what [ProducerBackend.AppendProducer] returns
// (wrapped or as is) when the producer's record is no longer at the
// revision the caller read: nothing was stored, and the bus reads the
// record again and checks the stamp again.
var ErrProducerConflict = hook.ErrProducerConflict

// ProducerBackend is a [Backend] that keeps the records of idempotent
// producers (eventbus.WithProducer; package producer has the rules), so
// that every node of a bus checks a stamp against the same record, across
// node restarts. adapters/nats implements it over JetStream. A bus made
// with [New] over a backend without it refuses stamped publishes with
// producer.ErrUnsupported.
//
// The bus checks the rules; the backend stores. For a stamped publish the
// bus calls ProducerState, checks the stamp against the record, and calls
// AppendProducer with the revision it read; on [ErrProducerConflict] it
// starts again, for at most 10 s. The check and the event are therefore
// one atomic step at the backend, whichever node publishes. Each node
// keeps a copy of the records its own publishes read and wrote, so that a
// producer publishing through one node costs one AppendProducer per
// event; the copy only ever saves a read (an accepted stamp still passes
// the backend's revision check, a refusal is made on a fresh read).
type ProducerBackend interface {
	Backend
	// ProducerState returns the record of producer id in session and its
	// revision: an opaque number, 0 when the session has no record of
	// that producer (st is then zero). Errors are the backend's
	// (producer.ErrUnsupported where it cannot keep records).
	ProducerState(ctx context.Context, session, id string) (st producer.State, rev uint64, err error)
	// AppendProducer stores ev as Append does and, in the same atomic
	// step, p as the record of producer p.ID in ev.Session (epoch p.Epoch,
	// last sequence p.Seq, last id the event's), but only if that record
	// is still at revision rev; it returns the event's id and the
	// record's new revision. When the record
	// moved it stores nothing and returns [ErrProducerConflict]. It may
	// return a *producer.Error with producer.ErrDuplicate when the backend
	// itself recognises the event as a repeat (nothing stored; LastID 0
	// when the backend cannot name the stored event). Other errors are
	// Append's.
	AppendProducer(ctx context.Context, path []string, ev eventbus.Event, p producer.Stamp, rev uint64) (id, newRev uint64, err error)
}
