// Package queue is one subscriber's two-sided queue: publishers append
// records to its [Queue] side, applying the live limits (frames and
// bytes), the warning at 75 %, the droppable cut and the overflow policy —
// away from every limit into a single-producer lane without a lock
// ([Queue.DeliverLockFree]), otherwise under the lock of the subscriber
// that owns it; the consumer takes everything queued in one step
// ([Queue.Drain]) into its [Reader] side and hands it out without the
// lock, publishing what it took from the limits with one atomic add per
// event. It knows records and frames, nothing of sessions, scopes or the
// bus.
//
// The rules come from qwen-code's EventBus (warning at 75 % with
// hysteresis, eviction with client_evicted, forced frames that never
// count), AgentPool's overflow policy names and OpenClaw's dropIfSlow;
// docs/protocol.md has the frames.
package queue
