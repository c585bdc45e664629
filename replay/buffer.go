package replay

import (
	"fmt"
	"sort"
)

// MaxCapacity is the largest capacity [New] accepts: 1,000,000 entries, the
// same soft cap qwen-code puts on its event ring (MAX_EVENT_RING_SIZE).
const MaxCapacity = 1_000_000

// Buffer is a bounded ring of entries of type T, oldest first. The zero value
// is not usable; create one with [New].
//
// Entries are expected to carry strictly increasing ids (as the event bus's
// sequence guarantees); the id-based methods ([Buffer.FirstID],
// [Buffer.LastID], [Buffer.HighestEvicted], [Buffer.AppendAfter]) rely on it.
//
// A Buffer is not safe for concurrent use; see the package documentation.
type Buffer[T any] struct {
	items   []T // ring storage; len(items) grows up to capacity
	head    int // index of the oldest entry
	n       int // number of entries held
	cap     int
	id      func(*T) uint64
	evicted uint64 // highest id ever dropped by Append or Clear
}

// New returns an empty Buffer that holds at most capacity entries.
//
// id extracts an entry's id; it may be nil when the entries carry none, in
// which case the id-based methods report 0 and [Buffer.AppendAfter] returns
// every entry.
//
// It returns an error naming the value when capacity is below 1 or above
// [MaxCapacity]. No memory for the entries is reserved up front.
func New[T any](capacity int, id func(*T) uint64) (*Buffer[T], error) {
	if capacity < 1 || capacity > MaxCapacity {
		return nil, fmt.Errorf("replay: capacity %d out of range [1, %d]", capacity, MaxCapacity)
	}
	return &Buffer[T]{cap: capacity, id: id}, nil
}

// Append adds v as the newest entry in O(1) (amortised while the buffer is
// still growing towards its capacity). When the buffer is full it drops the
// oldest entry and returns it with dropped true, as a deque(maxlen=N) does;
// the dropped entry's id then counts towards [Buffer.HighestEvicted].
func (b *Buffer[T]) Append(v T) (old T, dropped bool) {
	if b.n < b.cap {
		if b.n == len(b.items) {
			b.grow()
		}
		b.items[(b.head+b.n)%len(b.items)] = v
		b.n++
		return old, false
	}
	// Read the id through the slot, not through &old: passing &old to the
	// id function would move old to the heap and cost an allocation per
	// Append on a full buffer.
	slot := &b.items[b.head]
	if b.id != nil {
		if id := b.id(slot); id > b.evicted {
			b.evicted = id
		}
	}
	old, *slot = *slot, v
	b.head = (b.head + 1) % len(b.items)
	return old, true
}

// grow doubles the backing array, never beyond the capacity, and straightens
// the ring so that the oldest entry sits at index 0.
func (b *Buffer[T]) grow() {
	size := 2 * len(b.items)
	if size < 4 {
		size = 4
	}
	if size > b.cap {
		size = b.cap
	}
	items := make([]T, size)
	for i := 0; i < b.n; i++ {
		items[i] = b.items[(b.head+i)%len(b.items)]
	}
	b.items, b.head = items, 0
}

// at returns a pointer to the i-th oldest entry, 0 ≤ i < Len().
func (b *Buffer[T]) at(i int) *T { return &b.items[(b.head+i)%len(b.items)] }

// At returns the i-th oldest entry (0 is the oldest). It panics when i is
// outside [0, Len()), like a slice index.
func (b *Buffer[T]) At(i int) T {
	if i < 0 || i >= b.n {
		panic(fmt.Sprintf("replay: index %d out of range [0, %d)", i, b.n))
	}
	return *b.at(i)
}

// Replay returns a new slice with the newest limit entries, oldest first, as
// AgentPool's ReplayBuffer.replay(limit) for limit ≥ 0. A limit ≤ 0, or
// larger than [Buffer.Len], returns every entry: a negative limit does not
// drop the oldest entries (Replay(Len()-k) does; docs/python-parity.md). An
// empty buffer returns an empty slice.
func (b *Buffer[T]) Replay(limit int) []T {
	k := b.n
	if limit > 0 && limit < k {
		k = limit
	}
	out := make([]T, k)
	for i := 0; i < k; i++ {
		out[i] = *b.at(b.n - k + i)
	}
	return out
}

// AppendAfter appends to dst, oldest first, every entry whose id is greater
// than cursor and returns the extended slice; it allocates only when dst is
// too small. It finds the first such entry by binary search, so it costs
// O(log Len + returned entries). With no id function every entry is appended.
func (b *Buffer[T]) AppendAfter(dst []T, cursor uint64) []T {
	i := b.Search(cursor)
	if i >= b.n {
		return dst
	}
	// At most two contiguous runs of the ring: copied with append, not one
	// by one.
	start := (b.head + i) % len(b.items)
	end := start + (b.n - i)
	if end <= len(b.items) {
		return append(dst, b.items[start:end]...)
	}
	dst = append(dst, b.items[start:]...)
	return append(dst, b.items[:end-len(b.items)]...)
}

// Search returns the index (0 = oldest) of the first entry whose id is
// greater than cursor, or Len() when there is none. It is O(log Len).
func (b *Buffer[T]) Search(cursor uint64) int {
	if b.id == nil {
		return 0
	}
	return sort.Search(b.n, func(i int) bool { return b.id(b.at(i)) > cursor })
}

// Len returns the number of entries held, 0 ≤ Len ≤ Cap.
func (b *Buffer[T]) Len() int { return b.n }

// Cap returns the capacity given to [New].
func (b *Buffer[T]) Cap() int { return b.cap }

// FirstID returns the id of the oldest entry held, or 0 when the buffer is
// empty or has no id function.
func (b *Buffer[T]) FirstID() uint64 {
	if b.n == 0 || b.id == nil {
		return 0
	}
	return b.id(b.at(0))
}

// LastID returns the id of the newest entry held, or 0 when the buffer is
// empty or has no id function.
func (b *Buffer[T]) LastID() uint64 {
	if b.n == 0 || b.id == nil {
		return 0
	}
	return b.id(b.at(b.n - 1))
}

// HighestEvicted returns the highest id this buffer ever dropped, by
// [Buffer.Append] on a full buffer or by [Buffer.Clear]; 0 when it never
// dropped anything. A resume cursor below it has lost events.
func (b *Buffer[T]) HighestEvicted() uint64 { return b.evicted }

// MarkEvicted records that entries with ids up to upTo were dropped before
// they reached this buffer (for example by a distributed backend's own
// retention), so [Buffer.HighestEvicted] reports at least upTo.
func (b *Buffer[T]) MarkEvicted(upTo uint64) {
	if upTo > b.evicted {
		b.evicted = upTo
	}
}

// Clear drops every entry and releases the backing array, as AgentPool's
// clear_replay_buffer. The dropped ids count as evicted, so a later resume
// from before them is told it lost events. The capacity is kept.
func (b *Buffer[T]) Clear() {
	if id := b.LastID(); id > b.evicted {
		b.evicted = id
	}
	b.items, b.head, b.n = nil, 0, 0
}

// DropOldest drops the oldest entry, which then counts towards
// [Buffer.HighestEvicted] as if Append had pushed it out (a retention
// bound other than the capacity: bytes, age). It does nothing on an empty
// buffer.
func (b *Buffer[T]) DropOldest() {
	if b.n == 0 {
		return
	}
	slot := &b.items[b.head]
	if b.id != nil {
		if id := b.id(slot); id > b.evicted {
			b.evicted = id
		}
	}
	var zero T
	*slot = zero
	b.head = (b.head + 1) % len(b.items)
	b.n--
}
