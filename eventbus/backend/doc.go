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
