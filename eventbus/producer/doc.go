// Package producer holds the types of the bus's idempotent producers
// (Kafka's idempotent producer; Durable Streams' Producer-Id,
// Producer-Epoch and Producer-Seq): the Stamp a producer puts on one publish
// (eventbus.WithProducer) and the Error the bus answers with when it does
// not store it. It imports nothing of the project; the checks themselves
// are eventbus's.
//
// A publish may carry the id of the producer that makes it, the producer's
// epoch (raised when it restarts) and a sequence number (0, 1, 2, … within
// an epoch). The bus checks it against the session's record of that
// producer under the lock the publish takes anyway, and records the
// accepted one in the same step, so a check and its event are one atomic
// step:
//
//   - a retry of an accepted publish (a sequence at or below the last
//     accepted, same epoch) stores nothing and returns an *Error that
//     errors.Is ErrDuplicate, with the id of the last accepted event:
//     acknowledged, once;
//   - an epoch below the one in force is refused (ErrStaleEpoch): a zombie
//     producer is fenced after its replacement published;
//   - a sequence past the next is refused (ErrSequenceGap), naming the
//     expected one;
//   - a higher epoch starts at sequence 0 (else eventbus.ErrInvalid).
//
// The record ([State]) lives with the session in memory (one small entry
// per producer id, kept until the session is closed or expires). Over a
// backend that keeps producers (backend.ProducerBackend) it lives
// in the backend, so that every node checks against the same record: over
// NATS JetStream one subject per producer and session, updated in one
// atomic batch with the event under an expected-last-subject-sequence
// check (adapters/nats, docs/durable-streams.md has the window and the
// cost). Where the bus cannot check a stamp it refuses the publish with
// ErrUnsupported, never stores it unchecked.
package producer
