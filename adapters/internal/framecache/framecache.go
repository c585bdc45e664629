package framecache

import (
	"sync/atomic"
	"unsafe"

	"github.com/replaybus/replaybus/eventbus"
)

// Bounds of a Cache: Slots slots of at most Max bytes each (8 MiB per
// handler at most). Frames larger than Max are never cached; a stream that
// lags the others by more than Slots events encodes for itself.
const (
	Slots = 4096 // a power of two
	Max   = 2 << 10
)

// Cache is a fixed array of slots indexed by id and encoding variant; a
// slot holds one immutable encoded frame behind an atomic pointer, so
// readers never lock and never see a frame half written. A frame is reused
// only when everything it was built from matches: id, the Data slice itself
// (pointer and length — a coalesced event keeps the last merged id but has
// its own Data), Count, FirstID and the variant (the handler's number for
// the encode options and Replay flag it used). A miss just encodes (and
// replaces the slot, unless it holds a newer event): correctness never
// depends on a hit. The zero value is an empty cache; safe for concurrent
// use.
type Cache struct {
	slots  [Slots]atomic.Pointer[cachedFrame]
	claims [Slots]atomic.Uint64 // (id<<8 | variant) + 1 of the last stream that filled the slot
}

type cachedFrame struct {
	id      uint64
	data    *byte
	n       int
	count   int
	first   uint64
	variant uint8
	b       []byte // the encoded frame; never modified
}

// Frame returns ev encoded by encode, from the cache when ev's frame of this
// variant is there. encode appends the frame to its first argument (scratch
// emptied) and returns it; it must give the same bytes for the same event
// and variant, and every caller of one Cache must number its variants the
// same way. The result must not be modified. Only real events (ID ≠ 0) are
// cached; the others are encoded into scratch. newScratch is the buffer to
// pass next time (scratch, grown).
func (c *Cache) Frame(ev eventbus.Event, variant uint8, scratch []byte, encode func([]byte, eventbus.Event) []byte) (frame, newScratch []byte) {
	if ev.ID == 0 {
		b := encode(scratch[:0], ev)
		return b, b
	}
	data := unsafe.SliceData(ev.Data)
	// Consecutive ids take consecutive slots (streams that lag each other
	// by up to Slots events still share); variants are spread.
	i := (ev.ID + uint64(variant)*0x9E3779B9) & (Slots - 1)
	slot := &c.slots[i]
	f := slot.Load()
	if f != nil && f.id == ev.ID && f.variant == variant && f.data == data && f.n == len(ev.Data) &&
		f.count == ev.Count && f.first == ev.FirstID {
		return f.b, scratch
	}
	b := encode(scratch[:0], ev)
	if len(b) > Max || f != nil && f.id > ev.ID {
		// A stream more than Slots events behind another never evicts
		// the newer frame: it would only be evicted back, an allocation
		// each way, while the streams stay that far apart.
		return b, b
	}
	// The streams of one event are woken together and miss together: the
	// first to claim the slot for this id and variant stores the frame; the
	// others use their own encoding (already in scratch, no allocation).
	key := (ev.ID<<8 | uint64(variant)) + 1
	if c.claims[i].Swap(key) == key {
		return b, b
	}
	f = &cachedFrame{id: ev.ID, data: data, n: len(ev.Data), count: ev.Count, first: ev.FirstID, variant: variant,
		b: append(make([]byte, 0, len(b)), b...)}
	slot.Store(f)
	return b, b
}

// Each calls f with every frame the cache holds (for tests: none is over
// Max).
func (c *Cache) Each(f func(frame []byte)) {
	for i := range c.slots {
		if p := c.slots[i].Load(); p != nil {
			f(p.b)
		}
	}
}
