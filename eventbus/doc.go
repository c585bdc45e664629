// Package eventbus is a per-session event bus with a bounded replay buffer
// per session: every subscriber of an agent session sees every event once,
// in order, across reconnects and slow networks, or is told exactly what it
// missed.
//
// docs/guarantees.md states the delivery contract; this documentation
// states it for users of the API. docs/python-parity.md maps it to the
// Python EventBus of AgentPool that it ports, element by element.
//
// # Events and ids
//
// [Bus.Publish] encodes the payload to JSON once, assigns the next id of one
// bus-wide sequence (1, 2, 3, …), stores the event in the session's replay
// buffer and queues it for every subscriber whose scope covers the session.
// A payload that is not JSON goes through [Bus.PublishBytes] with its media
// type ([Event.ContentType]); JSON is the default.
// Ids therefore rise strictly within every session and every scope, and a
// subscriber of any scope resumes with one Last-Event-ID. Synthetic frames
// (state_resync_required, replay_complete, slow_client_warning,
// client_evicted, presence) have id 0 and never consume an id. Each bus has a random
// [Bus.Epoch]; a cursor from another epoch is an epoch_reset.
//
// # Delivery guarantees
//
//   - Exactly once, in order: every subscriber sees ids strictly increasing,
//     with no duplicate and no gap that a frame does not announce, across
//     concurrent publishers, subscribe racing publish, resume and close.
//   - History before live: [Bus.Subscribe] registers and snapshots under the
//     publish lock, so the replayed history (Replay=true) precedes every live
//     event and nothing falls between the two.
//   - Publish never blocks on a subscriber and never panics.
//   - Bounded memory: replay buffer size × sessions, live queue limits ×
//     subscribers, the replay byte budget, idle-session expiry.
//   - Prompt teardown: cancelling the context, [Subscription.Close],
//     [Bus.CloseSession] and [Bus.Close] end delivery and release every
//     registration; all are idempotent.
//
// # Sessions and the tree
//
// A session exists from its first publish or subscribe ([Existing] turns
// that off for one publish), or
// explicitly with [Bus.CreateSession], which also attaches a root to a
// parent at any time (cycles refused) and reopens a closed id (ACP
// session/resume). [Options.SessionController] supplies a new id's parent.
// [Bus.CloseSession] publishes session_closed, ends the session's own
// subscribers and moves its children up to its parent; its replay buffer
// stays readable for the descendants and all scopes of its open ancestors
// for Options.ClosedRetention, so a client of the run that resumes after a
// sub-agent finished loses nothing. A late publish to a closed id fails with
// ErrSessionClosed. CloseSession and ClearReplayBuffer on an unknown id are
// no-ops.
//
// # Backpressure
//
// Each subscriber has a live queue bounded in frames and bytes; replayed and
// synthetic frames never count. At 75 % of either limit it gets one
// slow_client_warning per episode (re-armed when both fall to 37.5 %). When
// the queue is full the overflow policy decides: drop_oldest (the default
// in process) and drop_newest keep it and announce the
// loss with state_resync_required{events_dropped}; drop_subscriber (the SSE
// handler's default, see Options.OverflowPolicy for the rule) ends it
// with client_evicted. Droppable
// types are dropped for a subscriber at or above the warning level instead.
//
// # Coalescing
//
// [SubscribeOptions.Coalesce] turns on subscriber-side coalescing: each
// read takes everything already queued
// and merges consecutive events with one merge key (the coalesce package
// has the rule sets) into one event carrying the last merged id, [Event.Count]
// and [Event.FirstID]; never across sessions, types, replay and live, or a
// synthetic frame. [SubscribeOptions.Throttle] adds a delta throttle.
// [Coalesce] merges a batch the same way.
//
// # Turns
//
// [Bus.StartTurn] starts a producer's turn on a session: a turn_start
// record in the log and a [Turn] whose context ends when a cancel is
// applied to it. [Bus.Cancel] writes a turn_cancel record — one turn, the
// session's active turns, or with Cascade its descendants' too; a turn not
// yet started is held for [Options.CancelHold] — and the turn's
// turn_end{cancelled} follows at once. Every turn ends exactly once
// (complete, error, cancelled, producer_lost), also when [Turn.End] races
// a cancel, its context ends, its session or the bus closes. The store
// derives which turn is active from the records as they are appended,
// here or by a backend's feed ([Bus.Turn]); over a
// backend.LeaseBackend a node's turns live under a lease, and another node ends
// them (producer_lost) when the node dies.
//
// # Presence
//
// Every subscription counts as attached to its session, as the client
// [SubscribeOptions.Client] names (a client's reconnect within
// [Options.PresenceGrace] is no leave and join) or anonymously; with
// [SubscribeOptions.Presence] it gets a presence frame first, then one
// per change: the clients, the agent status ([Bus.SetStatus]) and the
// active turn. Presence frames have no id and are never stored
// ([Bus.Presence] reads the same state).
//
// # Concurrency
//
// All Bus methods are safe for concurrent use. A Subscription is read by one
// goroutine at a time (Next, NextBefore, TryNext, All or Events); Close,
// Unsubscribe, Err and Done are safe from any goroutine. The bus starts one goroutine
// (session expiry), and [Subscription.Events] one per subscription that
// uses it. [Subscription.NextBefore] waits with a deadline (a stream's
// heartbeat) without a context: the bus keeps one queue of such deadlines
// and one timer for all of them.
//
// # Configuration and the packages around the bus
//
// [Options] is the bus's one configuration struct; each field says what
// zero means, and the config package fills it from the AGENTPOOL_EVENTBUS_*
// environment variables (this package never reads the environment). The
// frame package defines the bus's own frames on the wire (types, reasons,
// payloads), the observe package what the bus reports about itself (Stats,
// SessionInfo, Diagnostic). Package eventbus/backend is the seam for a bus whose history
// lives outside the process (adapters/nats: NATS JetStream), consumed by
// [NewWithBackend]; [Pipeline] publishes over it with appends in flight.
// docs/architecture.md has the package map and the locks.
package eventbus
