package store

import "github.com/replaybus/replaybus/replay"

// Log is one session's history. Not safe for concurrent use: the caller
// holds the lock that guards the session.
type Log[R any] interface {
	// Append adds r, whose id is above every id appended before, and
	// drops (evicts) the oldest record when the log is full.
	Append(r R)
	// AppendAfter appends to dst the records held with id > cursor,
	// oldest first, and returns the extended slice.
	AppendAfter(dst []R, cursor uint64) []R
	// CountAfter returns how many records held have id > cursor: what
	// AppendAfter would append.
	CountAfter(cursor uint64) int
	// Len returns the number of records held.
	Len() int
	// HighestEvicted returns the highest id the log dropped or was told
	// is lost (MarkEvicted); 0 when none.
	HighestEvicted() uint64
	// HighestEvictedOf is HighestEvicted counting only records whose type
	// is in types (and what MarkEvicted marked, of any type); nil types
	// count every record.
	HighestEvictedOf(types []string) uint64
	// MarkEvicted records that ids up to upTo are lost to this log
	// (history a backend dropped, an earlier incarnation of the session),
	// as if evicted.
	MarkEvicted(upTo uint64)
	// Clear drops every record held; they count as evicted.
	Clear()
	// Expire drops the records an age bound no longer keeps at now (Unix
	// ns), as evicted; a log without an age bound does nothing.
	Expire(now int64)
}

// NewRing returns an in-memory Log that holds the newest size records (1 to
// 1,000,000), id being each record's id.
func NewRing[R any](size int, id func(*R) uint64) (Log[R], error) {
	b, err := replay.New(size, id)
	if err != nil {
		return nil, err
	}
	return ring[R]{b}, nil
}

// ring is the Log of NewRing over a replay.Buffer.
type ring[R any] struct{ *replay.Buffer[R] }

func (r ring[R]) Append(v R) { r.Buffer.Append(v) }

func (r ring[R]) CountAfter(cursor uint64) int { return r.Buffer.Len() - r.Buffer.Search(cursor) }

func (r ring[R]) Expire(int64) {}

// HighestEvictedOf is HighestEvicted: a ring of records it knows only by
// id cannot tell their types (conservative: every loss counts).
func (r ring[R]) HighestEvictedOf([]string) uint64 { return r.HighestEvicted() }
