// Package backend is the seam below the delivery protocol of package
// eventbus for a bus whose ids, history and cross-node fan-out live outside
// the process: [Backend], which adapters/nats implements over NATS
// JetStream, the [Feed] it delivers into, and [New], which makes an
// [eventbus.Bus] over one. [Pipeline] publishes with a window of appends
// in flight over an [AsyncBackend].
//
// A program that keeps its bus in memory needs none of this: eventbus.New.
package backend
