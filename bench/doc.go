// Command bench compares replaybus with its peers — centrifuge's in-memory
// broker and hub, go-sse's Joe with a FiniteReplayer, a naive mutex+channel
// baseline that drops silently, and a lossless channel baseline ("chan") —
// and with the machine's floor, on workloads W1–W8 (see docs/benchmarks.md),
// in one process, alternating the systems run by run, and prints one
// Markdown table of medians with their spread. W8 is real SSE over loopback:
// each system's own HTTP handler, S TCP clients parsing every frame; W8ws
// (-only W8ws) is the same over each system's own WebSocket handler
// (replaybus's and centrifuge's), with S coder/websocket clients.
//
// The run is bracketed by a quiet-machine check (load average, a
// calibration loop before and after, other processes' share of the CPUs)
// whose verdict — quiet or CONTAMINATED, with the reasons — is printed
// above the table and in the last line.
//
//	cd bench && go run .          # the full run
//	cd bench && go run . -quick   # about a minute; the last line states replaybus ÷ go-sse
//	                              # (below 1 is faster; W1, W8 and the 10,000-event W3)
//	                              # with its spread, whether every lossless run lost
//	                              # nothing, and the machine verdict
//
// W3 (replay) takes each peer's own replay API at its fastest: go-sse's
// FiniteReplayer.Replay called on the resuming subscriber's goroutine,
// centrifuge's Node.History, replaybus's Subscribe with a cursor read in
// batches (NextBefore, then NextBatch) as its SSE handler reads; each then
// joins its system's live path from the last replayed id.
package main
