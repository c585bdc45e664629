// Package nats runs the replaybus event bus across several nodes on NATS
// JetStream: the second implementation of the [backend.Backend] seam
// (ids, history, cross-node fan-out), not a fork of the bus. A client connected to node B sees
// events published on node A, resumes on node C after B dies, and gets the
// same ids, frames and guarantees as from the in-memory bus, with the
// differences docs/distributed.md lists (a publish waits for JetStream's ack,
// bounded by the publish timeout; session create and close reach each node
// when its feed ingests them).
//
// # How it works
//
// One JetStream stream per bus ([WithStream]) holds every event. Each
// session has one subject that spells its place in the session tree,
// <prefix>.<root>.<child>…, with session ids escaped into subject tokens
// (bytes outside [A-Za-z0-9_-] become %XX), so a session's descendants are
// a subject wildcard. The stream keeps MaxMsgsPerSubject = the retention
// ([WithRetention], default [DefaultRetention]) × the replay buffer size
// (eventbus.Options.ReplayBufferSize) events per session (20 × 100 by
// default), so that a node that lags can still read what it has not ingested;
// each node's replay buffer stays the replay window.
//
// [eventbus.Bus.Publish] is a JetStream publish that waits for the ack;
// [eventbus.Pipeline] (eventbus.NewPipeline) keeps a window of acks in flight
// instead. The event id is the stream sequence, so ids rise strictly across
// the whole bus, on every node, as the in-memory sequence does. The stored
// message is a small binary envelope around the payload as published (a
// byte payload of [eventbus.Bus.PublishBytes] with its media type; see
// docs/distributed.md), with no headers. Every node runs one
// ordered consumer over the whole stream, from its first retained message,
// and ingests each event in sequence order into its local [eventbus.Bus]:
// the same replay buffers, subscriber queues, policies and frames as the
// in-memory bus, fed by the stream instead of by Publish. Subscribe,
// snapshot and replay therefore stay local and gap-free, and the hand-off
// from history to live deduplicates by sequence.
//
// CreateSession appends a control record so that every node learns the
// session and its parent; CloseSession appends session_closed, and every
// node closes the session when it ingests it. The epoch is derived from the
// stream's name and creation time: the same on every node and across
// restarts, new when the stream is re-created (an epoch_reset for clients).
//
// # Idempotent producers
//
// A publish eventbus.WithProducer is checked as in memory (package
// eventbus/producer has the rules) against a record kept in the stream:
// the last message on <prefix>.$P.<session>.<producer>, which every
// node's consumer skips. The event and the new record go in one atomic
// batch (NATS server 2.12+; the node sets the stream's AllowAtomicPublish),
// the record under Nats-Expected-Last-Subject-Sequence, so the check and
// the event are one step whichever node publishes, and the event carries a
// Nats-Msg-Id that JetStream de-duplicates within the stream's Duplicates
// window. [Backend] implements backend.ProducerBackend for this; the
// window and the cost are in docs/durable-streams.md.
//
// # Turns and presence
//
// [Backend] is an [backend.LeaseBackend]: the turns a node runs and its
// part of each session's presence live in a key-value bucket beside the
// stream, <stream>_LEASES, under the node's own key, which carries a TTL
// of eventbus.Options.TurnLease (default 5 s) and is renewed every
// quarter lease (per-message TTLs: NATS server 2.11+). Every node watches
// the bucket: when a node's key expires (killed, frozen, cut off) or its
// Close purges it, the others end its turns (turn_end{producer_lost},
// stored once however many nodes write it) about a lease later and drop
// its presence parts; presence changes reach the other nodes in
// milliseconds, and a node that starts reads every live part before its
// Start returns. Cancels cross nodes as records of the log. See
// docs/distributed.md, "Turns and presence across nodes".
//
// # Delivery guarantees
//
// Per node, exactly those of the in-memory bus (package eventbus): each
// subscriber sees ids strictly increasing, without duplicates and without a
// gap that no frame announces. Across nodes, all nodes see the same ids in
// the same order, so a client resumes on any node with its last id. A
// resume whose cursor is ahead of a node that lags waits for that node to
// catch up (see [backend.Syncer]). Events that JetStream dropped before a
// node read them (a node that starts after a session's subject filled, one
// that fell more than the retention behind, or one cut off from NATS while
// the stream moved on) are announced, conservatively: to the node's live
// subscribers in scope as state_resync_required{feed_gap} at that point of
// their stream, and to later resumes as ring_evicted.
//
// # Failures
//
// Publish errors from NATS (timeouts, no responders, a closed connection,
// an event over the server's payload limit) come back from Publish as
// errors; nothing panics. A lost connection ends the node's subscriptions
// with [ErrDisconnected] wrapped in [eventbus.ErrBackend];
// clients resume, and after the reconnect the consumer is re-created at once and goes on
// from the last event the node ingested. [Backend.Ready] says, without a
// request to the server, whether the node can serve meanwhile (for a
// readiness probe, or a 503 before a publish). A deleted or re-created stream ends them with [ErrStreamLost]
// and makes the node's publishes fail: start a new node.
//
// On a replicated stream ([WithReplicas]) a change of the stream's leader
// (a step-down, its server lost or cut off) leaves requests in flight to
// the old leader unanswered. The node hears of every election (JetStream's
// leader-elected advisory) and sends again at once what is safe to repeat:
// reads, a publish no stream received, and a stamped publish (JetStream
// de-duplicates it); a plain publish that went unanswered fails with
// [ErrNoAck] after the publish timeout, since it may be stored. The node's
// consumer has one replica, on one of the stream's servers: when that
// server dies while the node's own connection stays up, two missed
// heartbeats ([DefaultHeartbeat], 1 s) make the node create it again
// elsewhere. docs/distributed.md, "Failover", has the measured resume
// times.
//
// # Embedded server
//
// Package [github.com/replaybus/replaybus/adapters/nats/embedded] starts an
// in-process nats-server with JetStream (one, or a cluster on loopback
// ports), for a single process that wants the same code path or for tests.
// It is a package of its own so that importing this one links the nats.go
// client only, never a NATS server.
package nats
