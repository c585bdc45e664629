// Package store is where the history of package eventbus's bus lives in
// the process, below the delivery protocol.
//
// A [History] owns it: the session tree, each session's [Log], its
// idempotent producers' records, the logs of closed sessions kept for their
// ancestors, the tombstones and lost-id marks of closed or expired
// sessions, the id sequence, and the two locks that guard them (the
// structure lock and one lock per session tree). Each [Session] carries the
// delivery side's own state for it (its subscriber lists) as a type
// parameter, so that the bus's lists and the history share one tree and
// one lock without this package knowing the bus. A bus over a backend keeps
// the same History, filled by the backend's feed.
//
// A [Log] takes records in (Append), hands them out by cursor (AppendAfter,
// CountAfter) and reports what it no longer holds (HighestEvicted), so that
// a resume from before an evicted record is told
// (state_resync_required{ring_evicted}) instead of silently missing it. It
// has no lock of its own. [NewRing] is the bounded ring of the newest
// records (package replay); [New] makes a session's Log of records: the
// ring, remembering the types of what it drops (HighestEvictedOf), or a log
// that also bounds bytes and age and compacts (a [Merger] folds consecutive
// records of one key into one, and a cursor inside one gets exactly the
// parts after it; a [TextMerger]'s text runs are kept as their text and an
// 8-byte index per part). Whatever a Log drops it reports through
// HighestEvicted. Ids rise strictly in the order records are appended.
package store
