// Package eventbustest is the conformance suite of the delivery contract
// (docs/guarantees.md): one table of delivery tests that any [eventbus.Bus]
// must pass, whatever runs behind it — the in-memory bus of [eventbus.New]
// or a bus over a distributed backend such as adapters/nats. It plays the
// part that net/http/httptest and testing/slogtest play for their packages
// and that watermill's pubsub/tests play for its brokers.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		eventbustest.Run(t, func(t *testing.T, cfg eventbus.Options) *eventbus.Bus {
//			b, err := eventbus.New(cfg)
//			require.NoError(t, err)
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// A backend whose feed runs behind Publish (the bus learns of an event when
// its backend delivers it back) passes [WithSync] so the suite can wait
// until a bus has ingested everything published so far before it checks
// what is history and what is live.
//
// # What it checks
//
// History before live (with publishers racing the subscribe), the resume
// table (cursor inside the ring, before it, at its end, at or past the next
// id, from another epoch), the four scopes live and replayed, CloseSession,
// strict ordering under concurrent publishers in a session tree, and slow
// consumers (eviction with client_evicted, drop_newest with events_dropped),
// and turns (turn_start, turn_cancel and one turn_end in the log, the
// producer's context cancelled, a held cancel applied at the start).
// Tests never assume ids start at 1 or are contiguous: they use the ids
// Publish returns.
package eventbustest
