// Package replay provides [Buffer], the bounded replay buffer that keeps the
// newest events of one session so that a subscriber that joins late, or comes
// back after a disconnect, can be handed what it missed.
//
// It is the Go form of AgentPool's ReplayBuffer, a Python deque(maxlen=N):
// appending is O(1) and drops the oldest entry when the buffer is full, and
// [Buffer.Replay] returns entries oldest first. On top of AgentPool it keeps
// what a Last-Event-ID resume needs: the id of the oldest entry still held
// ([Buffer.FirstID]) and the highest id it ever dropped
// ([Buffer.HighestEvicted]), so a caller can tell a client whose cursor fell
// out of the window that events were lost (qwen-code's ring_evicted).
//
// # Memory
//
// A Buffer grows its backing array on demand, doubling up to its capacity,
// so an idle session costs a few words and not capacity slots. Once full it
// never allocates again on Append.
//
// # Concurrency
//
// A Buffer is not safe for concurrent use: the event bus guards each one with
// its publish lock. Use it from one goroutine or under your own mutex.
package replay
