// Package evframe queues the SSE frames that the frontend encoders
// (adapters/agui, adapters/a2a) derive from bus events and writes them
// with ids that name how much of the session log each holds: the frames
// of event N are "<epoch>-<N>:0", "<epoch>-<N>:1", … and the last of them
// "<epoch>-<N>"; frames of event 0 (a bus frame) have no id. A [Queue]
// also skips frames, for a resume inside an event and for priming an
// encoder with the events before a stream's start. It is for one stream
// and one goroutine.
package evframe
