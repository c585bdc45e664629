// Command bench compares replaybus with its peers — centrifuge's in-memory
// broker and hub, go-sse's Joe with a FiniteReplayer, a naive mutex+channel
// baseline — and with the machine's floor, on workloads W1–W7 (see
// docs/benchmarks.md), in one process, alternating the systems run by run,
// and prints one Markdown table of medians with their spread.
//
//	cd bench && go run .          # the full run
//	cd bench && go run . -quick   # under a minute; last line: replaybus W1 S=100
package main
