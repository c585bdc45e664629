// Package deadline is a queue of waiters' deadlines served by one runtime
// timer: a min-heap by deadline whose timer is set to the earliest entry and
// which calls a wake callback, outside its own lock, for every entry that
// is due. It knows nothing of what waits: the bus queues its parked
// readers' deadlines here (Subscription.NextBefore) and decides in the
// callback whether a reader is still parked.
//
// One queue per bus, not per process, so that a bus and its timer live in
// the same testing/synctest bubble.
package deadline
