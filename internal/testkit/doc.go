// Package testkit holds the test helpers that the tests of more than one
// package need, written once: a bus and a subscription that are closed when
// the test ends, a read bounded by [WaitFor], and the TestMain that fails a
// package whose tests leave a goroutine behind and sets its property tests'
// defaults, and the byte payloads the round trips of every path (memory,
// NATS, SSE, WebSocket) publish and check. Only tests import it.
package testkit
