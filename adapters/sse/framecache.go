package sse

import (
	"github.com/replaybus/replaybus/adapters/internal/framecache"
	"github.com/replaybus/replaybus/eventbus"
)

// frameCache lets every stream of a handler share one encoding of an event
// (see the framecache package: 4,096 frames of up to 2 KiB, 8 MiB at most
// per handler). Its variants are the encodings one handler can produce for
// one event: Replay, and the event: line left out.
type frameCache struct {
	c framecache.Cache
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
	return c.c.Frame(ev, variantOf(ev, opts), scratch, func(dst []byte, ev eventbus.Event) []byte {
		return AppendEvent(dst, ev, opts)
	})
}
