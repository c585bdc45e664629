// Command walk lists the files of the project a publish crosses on its way
// to an SSE frame: it opens a live SSE stream, clears the coverage
// counters, publishes one event, reads the frame's bytes off the
// connection, and writes the counters to $WALKDIR. Build it with coverage
// over the project's packages and read the counters with go tool covdata
// (docs/architecture.md, "A publish, file by file", has the commands).
package main
