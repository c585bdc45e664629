package backend

import (
	"context"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/internal/hook"
)

// ErrBackend wraps a backend failure that ended a subscription of a bus
// made with [New] (Subscription.Err: errors.Is(err, ErrBackend), wrapping
// the backend's own error, e.g. adapters/nats's ErrDisconnected); clients
// then resume, on this node once the backend recovers or on another.
// The in-memory bus never ends a subscription with it.
var ErrBackend = hook.ErrBackend

// Backend is the one seam below the delivery protocol: where ids, history and cross-node
// fan-out live. The in-memory bus (eventbus.New) needs none; adapters/nats
// implements it over NATS JetStream so that several bus nodes share one
// sequence. The delivery protocol — subscriber queues, policies, frames,
// scopes — stays in the Bus and does not know which backend runs.
//
// A bus made with [New] keeps a local replay buffer per session
// that the backend's feed fills; subscribe, snapshot and replay are local,
// so the four-step subscribe protocol stays gap-free and duplicate-free
// whatever the backend.
type Backend interface {
	// Epoch identifies the backend's history: the same on every node and
	// across node restarts, new when the history is lost (a re-created
	// stream), so that cursors from the old history are an epoch_reset.
	Epoch() string
	// Append stores ev (ID 0; Session, Type, Data, Time, Origin set) for
	// the session whose place in the tree is path (root first, the session
	// last) and returns the id it was given. Ids rise strictly in the order
	// events reach every node's [Feed]. It must not wait on any subscriber;
	// it returns the backend's error (timeouts, no responders, a closed
	// connection) as is. The bus passes a ctx without deadline: the backend
	// bounds the append by its own timeout (one timer per append). A byte
	// payload (ev.IsJSON false, of [eventbus.Bus.PublishBytes]) is stored with
	// its media type (ev.ContentType) and handed back to Feed.Ingest with
	// it ([eventbus.Event.WithContentType]).
	Append(ctx context.Context, path []string, ev eventbus.Event) (uint64, error)
	// Start begins feeding every stored event to feed in id order, from the
	// oldest the backend still holds. Calls to feed never overlap. It
	// returns once the feed is running; ctx bounds the start only.
	Start(ctx context.Context, feed Feed) error
	// Close stops the feed and releases the backend. Idempotent.
	Close() error
}

// Feed is what a [Backend] delivers into: [New] hands the bus's own to
// Backend.Start. Backends call it from one goroutine at a time.
type Feed interface {
	// Ingest hands over one stored event with its id. Events with an id at
	// or below one already ingested are ignored (deduplication by sequence
	// on the hand-off from history to live). A session_closed event closes
	// the session on this node; a TypeSessionCreated event only creates the
	// sessions along path.
	Ingest(path []string, ev eventbus.Event)
	// Evicted records that the backend dropped the session's events with
	// ids up to upTo before this node saw them, so a resume from before
	// them gets ring_evicted rather than a silent gap. When upTo is at or
	// past the next id the node expects (events it never ingested, not
	// ones its ring already holds), every live subscriber whose scope
	// covers the session also gets state_resync_required{feed_gap} at that
	// point of its stream, before the events that follow the gap.
	Evicted(path []string, upTo uint64)
	// Fail ends every current subscription with err (wrapped in
	// backend.ErrBackend); clients then resume, here once the backend recovers or
	// on another node. The bus stays usable.
	Fail(err error)
}

// Syncer is implemented by a [Backend] whose feed can run behind its
// appends (adapters/nats): LastID asks the backend for the highest id it has
// stored, whichever node appended it.
//
// A bus over a Syncer uses it when a Subscribe carries a cursor at or past
// the next id this node expects (a client that moves from a node ahead to a
// node behind): Subscribe first waits, bounded by its context and 10 s, until
// the feed has ingested up to min(cursor, LastID), and only then decides on
// epoch_reset, so such a client is neither told to resync nor handed an id
// twice. Without Syncer the wait is for the cursor itself.
type Syncer interface {
	// LastID returns the highest id the backend has stored that this
	// node's feed will ingest, or the backend's error: Subscribe then
	// fails with it, wrapped in ErrBackend (the client retries, here or
	// on another node), rather than answer epoch_reset to a cursor it
	// cannot check.
	LastID(ctx context.Context) (uint64, error)
}

// TypeSessionCreated is the type of the control record a backend-driven bus
// appends for eventbus.Bus.CreateSession so every node learns the session and its
// parent. It consumes an id but is never stored or delivered.
const TypeSessionCreated = "_replaybus.session_created"

// New returns a bus whose ids, history and cross-node fan-out come from
// be, configured by opts as eventbus.New is (opts.Epoch is ignored: the
// bus's epoch is be.Epoch()). It calls be.Start with the bus's [Feed] and
// returns its error, wrapped; ctx bounds the start only. [eventbus.Bus.Close]
// also closes be. Errors: opts's validation errors (as eventbus.New), and
// be.Start's.
func New(ctx context.Context, opts eventbus.Options, be Backend) (*eventbus.Bus, error) {
	bus, feed, err := hook.NewBus(opts, be)
	if err != nil {
		return nil, err
	}
	b := bus.(*eventbus.Bus)
	if err := be.Start(ctx, feed.(Feed)); err != nil {
		b.Close()
		return nil, fmt.Errorf("eventbus: starting backend: %w", err)
	}
	return b, nil
}
