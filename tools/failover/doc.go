// Command failover is the failover harness of the bus over NATS JetStream:
// three nats-server child processes (a JetStream cluster), a stream with
// three replicas on file storage, two bus nodes (examples/agentserver
// child processes with -nats and -nats-replicas 3), pipelined idempotent
// producers publishing through both nodes and live SSE subscribers on
// both, while it injects seeded faults into the stream's leader: SIGKILL,
// graceful step-down, and a partition from the other servers. At the end
// it reads the stream and proves that every acknowledged event is stored
// once, in its producer's order, and reached every live subscriber of both
// nodes exactly once in order, or was announced to it by a gap frame; and
// it reports how long publishing and reading took to resume after each
// kind of fault.
//
//	cd tools && go run ./failover                    # 30 kills, 30 step-downs, 10 partitions, ≤ 10 min
//	go run ./failover -seed 42 -kills 3 -stepdowns 3 -partitions 1
//	go run ./failover -sync always                   # the servers sync every write
//
// The seed is printed first; the same seed replays the same schedule
// (which fault, in which order, the pauses and partition lengths). The
// exit status is 0 when every property held, 1 otherwise (the data and
// every process's log are kept then), 2 for bad flags. A short run is
// part of go test (TestFailoverShort). docs/distributed.md has the
// figures of a full run.
package main
