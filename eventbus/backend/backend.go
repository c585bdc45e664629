// Package backend is the contract between an eventbus.Bus made with
// eventbus.NewWithBackend and what stores its history for several nodes
// (adapters/nats implements it over NATS JetStream). Only a backend's
// author imports it: a user of the bus is handed none of it, as a user of
// database/sql is handed nothing of database/sql/driver.
//
// A backend implements [Backend] and, where it can, the optional
// [Syncer], [AsyncBackend], [ProducerBackend] and [LeaseBackend]; the bus
// hands it a [Feed] to deliver stored events into, as [Record] values.
package backend

import (
	"context"
	"errors"
	"time"

	"github.com/replaybus/replaybus/eventbus/producer"
)

// ErrProducerConflict is what [ProducerBackend.AppendProducer] returns
// (wrapped or as is) when the producer's record is no longer at the
// revision the caller read: nothing was stored.
var ErrProducerConflict = errors.New("eventbus: producer record changed meanwhile")

// Record is one event as a backend stores and feeds it. The session is the
// last element of the path beside it (root first).
type Record struct {
	// ID is the event's id: 0 on Append, the backend's on Ingest.
	ID uint64
	// Type is the event type, never empty.
	Type string
	// Data is the payload: JSON unless ContentType is set. The bus never
	// modifies it.
	Data []byte
	// Time is when the bus accepted the event.
	Time time.Time
	// Origin names the client that caused the event, or is empty.
	Origin string
	// ContentType is the payload's media type, empty for JSON. On Ingest a
	// type the process cannot intern is delivered as
	// application/octet-stream.
	ContentType string
}

// Backend stores a bus's events for every node that shares it. A bus made
// with eventbus.NewWithBackend keeps a local replay buffer per session that
// the backend's [Feed] fills; subscribe, snapshot and replay stay local.
type Backend interface {
	// Epoch identifies the backend's history: the same on every node and
	// across restarts, new when the history is lost.
	Epoch() string
	// Append stores r (ID 0) for the session at the end of path (root
	// first) and returns its id. Ids rise strictly in the order records
	// reach every node's Feed. It never waits on a subscriber; ctx has no
	// deadline (the backend bounds the append itself).
	Append(ctx context.Context, path []string, r Record) (uint64, error)
	// Start feeds every stored record to feed in id order, oldest held
	// first, one call at a time. It returns once the feed runs; ctx
	// bounds the start only.
	Start(ctx context.Context, feed Feed) error
	// Close stops the feed and releases the backend. Idempotent.
	Close() error
}

// Feed is what a [Backend] delivers into: the bus hands its own to
// Backend.Start. Backends call Ingest, Evicted and Fail from one
// goroutine at a time; TurnLost and Presence may come from any goroutine.
type Feed interface {
	// Ingest hands over one stored record with its id; an id at or below
	// one already ingested is ignored. A session_closed record closes the
	// session on this node.
	Ingest(path []string, r Record)
	// Evicted records that the session's events up to upTo were dropped
	// before this node saw them: a resume from before them gets
	// ring_evicted, and when upTo is past what the node ingested, live
	// subscribers in scope get state_resync_required{feed_gap}.
	Evicted(path []string, upTo uint64)
	// Fail ends every current subscription with err wrapped in
	// eventbus.ErrBackend; the bus stays usable.
	Fail(err error)
	// TurnLost reports that the lease of turn of session expired
	// ([LeaseBackend]): unless the turn has ended, the bus appends its
	// turn_end{producer_lost}. Any number of nodes may report it; a
	// second end is never stored.
	TurnLost(session, turn string)
	// Presence hands over node's part of session's presence
	// ([LeaseBackend.SharePresence]), nil when it went.
	Presence(node, session string, part []byte)
}

// Syncer is a [Backend] whose feed can run behind its appends. A Subscribe
// whose cursor is at or past this node's next id first waits (bounded by
// its context and 10 s) until the feed reaches min(cursor, LastID), then
// decides on epoch_reset. Without Syncer the wait is for the cursor.
type Syncer interface {
	// LastID returns the highest id stored, whichever node appended it,
	// or the backend's error: Subscribe then fails with it wrapped in
	// eventbus.ErrBackend.
	LastID(ctx context.Context) (uint64, error)
}

// AsyncBackend is a [Backend] that can keep several appends in flight;
// eventbus.Pipeline uses it.
type AsyncBackend interface {
	Backend
	// AppendAsync sends r as Append stores it, without waiting for the
	// id. Records sent by one goroutine are stored in the order sent, each
	// or not at all. An error means the record was not sent.
	AppendAsync(path []string, r Record) (PendingAppend, error)
}

// PendingAppend is one append of [AsyncBackend.AppendAsync] in flight.
type PendingAppend interface {
	// Wait returns the record's id once stored, the backend's error (the
	// record may or may not be stored), or ctx's error (still pending;
	// Wait may be called again).
	Wait(ctx context.Context) (uint64, error)
}

// ProducerBackend is a [Backend] that keeps the records of idempotent
// producers (eventbus.WithProducer), so that every node checks a stamp
// against the same record. The bus checks; the backend stores, under a
// revision check, so a check and its event are one atomic step. A bus over
// a backend without it refuses stamped publishes with
// producer.ErrUnsupported.
type ProducerBackend interface {
	Backend
	// ProducerState returns producer id's record in session and its
	// revision, 0 (and a zero State) when there is none.
	ProducerState(ctx context.Context, session, id string) (st producer.State, rev uint64, err error)
	// AppendProducer stores r as Append does and, atomically, p as the
	// record of p.ID in the session at the end of path, if that record is
	// still at revision rev; it returns the record's id and the producer
	// record's new revision. Errors: ErrProducerConflict (nothing stored),
	// a *producer.Error with producer.ErrDuplicate when the backend knows
	// the event, Append's.
	AppendProducer(ctx context.Context, path []string, r Record, p producer.Stamp, rev uint64) (id, newRev uint64, err error)
}

// LeaseBackend is a [Backend] that keeps what this node holds alive under
// a lease (eventbus.Options.TurnLease), so that the other nodes learn when
// it dies without a goodbye (killed, cut off): the turns it runs and its
// part of each session's presence (state shared between nodes, never in
// the log). A bus over a Backend without it keeps both to each node.
// Close drops this node's leases and parts (the bus has written its
// goodbye: turn_end{producer_lost} for the turns it ran). Methods are
// called from several goroutines, never under a bus lock.
type LeaseBackend interface {
	Backend
	// HoldTurn leases turn of session to this node, renewed until
	// ReleaseTurn or Close. Once the node stops renewing it without a
	// release, the backend calls Feed.TurnLost(session, turn) on at least
	// one other node within 2×lease.
	HoldTurn(ctx context.Context, session, turn string, lease time.Duration) error
	// ReleaseTurn drops turn's lease: the turn ended.
	ReleaseTurn(ctx context.Context, session, turn string) error
	// SharePresence replaces this node's part of session's presence (a
	// JSON value the bus reads back; nil drops it: the session closed or
	// expired here) and hands it to every other node's Feed.Presence — a
	// node that starts later gets every live part — kept under the node's
	// lease: a dead node's parts go (Presence with nil) within 2×lease.
	SharePresence(ctx context.Context, session string, part []byte, lease time.Duration) error
}
