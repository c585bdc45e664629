package eventbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus/producer"
)

// The backend seam: where ids, history and cross-node fan-out live when a
// bus spans several nodes (adapters/nats implements it over NATS
// JetStream). It is declared here, beside [NewWithBackend], the one
// function that consumes it; the in-memory bus ([New]) needs none of it.

// ErrBackend wraps a backend failure: the reason a subscription of a bus
// made with [NewWithBackend] ends when its backend fails (wrapping the
// backend's own error), and what Subscribe returns when the backend cannot
// say how far behind this node is. The in-memory bus never returns it.
var ErrBackend = errors.New("eventbus: backend failure")

// ErrProducerConflict is what [ProducerBackend.AppendProducer] returns
// (wrapped or as is) when the producer's record is no longer at the
// revision the caller read: nothing was stored.
var ErrProducerConflict = errors.New("eventbus: producer record changed meanwhile")

// Backend stores a bus's events for every node that shares it. A bus made
// with [NewWithBackend] keeps a local replay buffer per session that the
// backend's [Feed] fills; subscribe, snapshot and replay stay local.
type Backend interface {
	// Epoch identifies the backend's history: the same on every node and
	// across restarts, new when the history is lost.
	Epoch() string
	// Append stores ev (ID 0) for the session at the end of path (root
	// first) and returns its id. Ids rise strictly in the order events
	// reach every node's Feed. It never waits on a subscriber; ctx has no
	// deadline (the backend bounds the append itself). A byte payload
	// keeps its media type ([Event.ContentType]).
	Append(ctx context.Context, path []string, ev Event) (uint64, error)
	// Start feeds every stored event to feed in id order, oldest held
	// first, one call at a time. It returns once the feed runs; ctx
	// bounds the start only.
	Start(ctx context.Context, feed Feed) error
	// Close stops the feed and releases the backend. Idempotent.
	Close() error
}

// Feed is what a [Backend] delivers into: the bus hands its own to
// Backend.Start. Backends call it from one goroutine at a time.
type Feed interface {
	// Ingest hands over one stored event with its id; an id at or below
	// one already ingested is ignored. A session_closed event closes the
	// session on this node.
	Ingest(path []string, ev Event)
	// Evicted records that the session's events up to upTo were dropped
	// before this node saw them: a resume from before them gets
	// ring_evicted, and when upTo is past what the node ingested, live
	// subscribers in scope get state_resync_required{feed_gap}.
	Evicted(path []string, upTo uint64)
	// Fail ends every current subscription with err wrapped in
	// ErrBackend; the bus stays usable.
	Fail(err error)
}

// Syncer is a [Backend] whose feed can run behind its appends. A Subscribe
// whose cursor is at or past this node's next id first waits (bounded by
// its context and 10 s) until the feed reaches min(cursor, LastID), then
// decides on epoch_reset. Without Syncer the wait is for the cursor.
type Syncer interface {
	// LastID returns the highest id stored, whichever node appended it,
	// or the backend's error: Subscribe then fails with it wrapped in
	// ErrBackend.
	LastID(ctx context.Context) (uint64, error)
}

// AsyncBackend is a [Backend] that can keep several appends in flight;
// [Pipeline] uses it.
type AsyncBackend interface {
	Backend
	// AppendAsync sends ev as Append stores it, without waiting for the
	// id. Events sent by one goroutine are stored in the order sent, each
	// or not at all. An error means the event was not sent.
	AppendAsync(path []string, ev Event) (PendingAppend, error)
}

// PendingAppend is one append of [AsyncBackend.AppendAsync] in flight.
type PendingAppend interface {
	// Wait returns the event's id once stored, the backend's error (the
	// event may or may not be stored), or ctx's error (still pending; Wait
	// may be called again).
	Wait(ctx context.Context) (uint64, error)
}

// ProducerBackend is a [Backend] that keeps the records of idempotent
// producers ([WithProducer]), so that every node checks a stamp against
// the same record. The bus checks; the backend stores, under a revision
// check, so a check and its event are one atomic step. A bus over a
// backend without it refuses stamped publishes with producer.ErrUnsupported.
type ProducerBackend interface {
	Backend
	// ProducerState returns producer id's record in session and its
	// revision, 0 (and a zero State) when there is none.
	ProducerState(ctx context.Context, session, id string) (st producer.State, rev uint64, err error)
	// AppendProducer stores ev as Append does and, atomically, p as the
	// record of p.ID in ev.Session, if that record is still at revision
	// rev; it returns the event's id and the record's new revision.
	// Errors: ErrProducerConflict (nothing stored), a *producer.Error with
	// producer.ErrDuplicate when the backend knows the event, Append's.
	AppendProducer(ctx context.Context, path []string, ev Event, p producer.Stamp, rev uint64) (id, newRev uint64, err error)
}

// NewWithBackend returns a bus whose ids, history and cross-node fan-out
// come from be, configured by cfg as [New] does (cfg.Epoch is ignored: the
// epoch is be.Epoch()). It starts be with the bus's [Feed]; ctx bounds the
// start only. [Bus.Close] also closes be. Errors: cfg's, as New, and
// be.Start's, wrapped.
func NewWithBackend(ctx context.Context, cfg Options, be Backend) (*Bus, error) {
	b, feed, err := newBus(cfg, be)
	if err != nil {
		return nil, err
	}
	if err := be.Start(ctx, feed); err != nil {
		b.Close()
		return nil, fmt.Errorf("eventbus: starting backend: %w", err)
	}
	return b, nil
}
