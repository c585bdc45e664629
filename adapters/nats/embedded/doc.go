// Package embedded runs nats-server with JetStream inside the process: one
// server ([RunServer]) for the embedded mode of examples/agentserver or for
// tests, or a cluster of them on loopback ports ([RunCluster]).
//
// It lives apart from package nats (the bus over NATS JetStream) so that a
// program that only connects to a NATS system does not link a NATS server:
// importing github.com/replaybus/replaybus/adapters/nats pulls in the nats.go
// client only, as nats.go itself keeps its test server in a separate
// package. Every type here is safe for concurrent use.
package embedded
