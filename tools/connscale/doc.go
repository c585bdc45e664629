// Command connscale is the connection-scale harness: idle SSE and
// WebSocket connections held by real clients (each reads every frame),
// the server's memory per connection (RSS, heap, goroutine stacks), its
// CPU while they idle, and the publish→receive latency of one active
// session among them, for replaybus's handlers (adapters/sse, adapters/ws,
// every option at its default) beside centrifuge's on the same harness;
// then the same at 50,000 connections across three bus nodes over one NATS
// cluster, with one node SIGKILLed and its clients resuming elsewhere.
//
//	cd tools && go run ./connscale                       # 10,000 idle SSE and WebSocket, replaybus and centrifuge
//	go run ./connscale -transports sse -rounds 3         # alternated rounds
//	go run ./connscale -scenario cluster                 # 50,000 over NATS, a node killed
//
// Every server and client runs in a process of its own (this program,
// re-run as "connscale serve" and "connscale clients"): a process may hold
// at most 20,000 open files on this machine (docs/operations.md), so the
// clients are spread over processes of 10,000 connections. The figures
// are in docs/benchmarks.md.
package main
