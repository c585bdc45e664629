// Package store is the seam below the delivery protocol of package eventbus
// for where a session's history lives: a [Log] takes records in (Append),
// hands them out by cursor (AppendAfter, CountAfter) and reports what it
// no longer holds (HighestEvicted), so that a resume from before an
// evicted record is told (state_resync_required{ring_evicted}) instead of
// silently missing it. The bus reads and writes a session's Log under the
// lock of the session's tree; a Log has no lock of its own.
//
// [NewRing] is the in-memory implementation: a bounded ring of the newest
// records (package replay), which a bus over a backend also keeps per
// session, filled by the backend's feed. [New] makes a session's Log of
// records: the ring, remembering the types of what it drops (so that a
// resume filtered by type is told only of its own losses:
// HighestEvictedOf), or a log that also bounds bytes and age and compacts
// (a [Merger] folds consecutive records of one key into one, which counts
// once, and a cursor inside one gets exactly the parts after it; a
// [TextMerger]'s text runs are kept as their text and an 8-byte index per
// part, not as every part's payload);
// whatever a Log drops it must report through HighestEvicted.
//
// NewRing's Log knows records only through their ids (the id function
// given to it): ids rise strictly in the order records are appended.
package store
