package sse

import (
	"sync/atomic"
	"unsafe"

	"github.com/replaybus/replaybus/eventbus"
)

// The frame cache lets every stream of a handler share one encoding of an
// event: a published event reaches S subscribers as S Event values that
// share their Data bytes, and without the cache each stream would build the
// same frame S times. Centrifuge and go-sse encode once per publish too.
//
// It is a fixed array of slots indexed by id and encoding variant; a slot
// holds one immutable encoded frame behind an atomic pointer, so readers
// never lock and never see a frame half written. A frame is reused only
// when everything it was built from matches: id, the Data slice itself
// (pointer and length — a coalesced event keeps the last merged id but has
// its own Data), Count, FirstID, Replay and the encode options. A miss just
// encodes (and replaces the slot): correctness never depends on a hit.
//
// Memory is bounded: frameCacheSlots × frameCacheMax bytes per handler at
// most (8 MiB), and frames larger than frameCacheMax are never cached. A
// stream that lags the others by more than frameCacheSlots events encodes
// for itself.
const (
	frameCacheSlots = 4096 // a power of two
	frameCacheMax   = 2 << 10
)

type frameCache struct {
	slots  [frameCacheSlots]atomic.Pointer[cachedFrame]
	claims [frameCacheSlots]atomic.Uint64 // (id<<2 | variant) + 1 of the last stream that filled the slot
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

// variantOf numbers the encodings one handler can produce for one event.
func variantOf(ev eventbus.Event, opts EncodeOptions) uint8 {
	var v uint8
	if ev.Replay {
		v |= 1
	}
	if opts.NoEventField {
		v |= 2
	}
	return v
}

// frame returns ev encoded with opts (whose Epoch is the handler's, the same
// for every stream), from the cache when possible. The result must not be
// modified. Only real events (ID ≠ 0) are cached; others are appended to
// scratch.
func (c *frameCache) frame(ev eventbus.Event, opts EncodeOptions, scratch []byte) (frame, newScratch []byte) {
	if ev.ID == 0 {
		b := AppendEvent(scratch[:0], ev, opts)
		return b, b
	}
	v := variantOf(ev, opts)
	data := unsafe.SliceData(ev.Data)
	// Consecutive ids take consecutive slots (streams that lag each other
	// by up to frameCacheSlots events still share); variants are spread.
	i := (ev.ID + uint64(v)*0x9E3779B9) & (frameCacheSlots - 1)
	slot := &c.slots[i]
	match := func(f *cachedFrame) bool {
		return f != nil && f.id == ev.ID && f.variant == v && f.data == data && f.n == len(ev.Data) &&
			f.count == ev.Count && f.first == ev.FirstID
	}
	if f := slot.Load(); match(f) {
		return f.b, scratch
	}
	b := AppendEvent(scratch[:0], ev, opts)
	if len(b) > frameCacheMax {
		return b, b
	}
	// The streams of one event are woken together and miss together: the
	// first to claim the slot for this id and variant stores the frame; the
	// others use their own encoding (already in scratch, no allocation).
	key := (ev.ID<<2 | uint64(v)) + 1
	if c.claims[i].Swap(key) == key {
		return b, b
	}
	f := &cachedFrame{id: ev.ID, data: data, n: len(ev.Data), count: ev.Count, first: ev.FirstID, variant: v,
		b: append(make([]byte, 0, len(b)), b...)}
	slot.Store(f)
	return b, b
}
