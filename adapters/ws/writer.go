package ws

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Bounds of one batch: the frames and bytes sent with one write, as the SSE
// handler's (a frame is never split across batches).
const (
	maxBatch      = 64
	maxBatchBytes = 64 << 10
)

// writeLoop writes every frame of sub until the subscription or the
// connection ends, then closes with the code the end calls for. The frames
// that are ready together are one batch: up to maxBatch frames or
// maxBatchBytes, sent with one write under one write deadline, each real
// event's frame taken from the handler's cache (encoded once for every
// connection).
func (cn *conn) writeLoop(sub *eventbus.Subscription) {
	w := frameWriter{cn: cn, sub: sub, done: sub.Done()}
	if !cn.h.o.PlainIDs {
		w.epoch = cn.h.bus.Epoch()
	}
	for {
		ev, err := sub.Next(cn.ctx)
		if err != nil {
			cn.closeEnded(err)
			return
		}
		n, err := w.batch(ev)
		if err != nil {
			if cn.ctx.Err() == nil || cn.h.streams.Closed() {
				cn.h.writeErrors.Add(1)
			}
			cn.abort()
			return
		}
		cn.h.frames.Add(uint64(n))
	}
}

// frameWriter writes the batches of writeLoop.
type frameWriter struct {
	cn      *conn
	sub     *eventbus.Subscription
	epoch   string
	done    <-chan struct{}
	scratch []byte // frames not taken from the cache are encoded here
	out     []byte // the batch being built (direct connections)
}

// batch writes ev and every frame sub has ready after it, up to the batch
// bounds, and sends them; it returns how many frames it wrote.
func (w *frameWriter) batch(ev eventbus.Event) (int, error) {
	cn, direct := w.cn, w.cn.cork.direct
	if !direct {
		cn.cork.corkWrites()
	}
	w.out = w.out[:0]
	n, size := 0, 0
	for {
		var ok bool
		if ev, ok = w.skipEvicted(ev); !ok {
			break
		}
		if direct {
			var f []byte
			if cn.h.active.Load() > 1 {
				f, w.scratch = cn.h.cache.Frame(ev, replayVariant(ev), w.scratch, w.encode)
			} else {
				f = w.encode(w.scratch[:0], ev)
				w.scratch = f
			}
			w.out = append(w.out, f...)
			size += len(f)
		} else {
			// Compressed: coder/websocket frames (and deflates) each
			// message; the cork collects them for one write.
			w.scratch = resume.AppendEnvelope(w.scratch[:0], ev, w.epoch)
			if err := cn.c.Write(context.Background(), websocket.MessageText, w.scratch); err != nil {
				_ = cn.cork.uncork()
				return n, err
			}
			size += len(w.scratch)
		}
		if cap(w.scratch) > maxBatchBytes {
			w.scratch = nil // do not pin one huge frame
		}
		n++
		if n >= maxBatch || size >= maxBatchBytes {
			break
		}
		if ev, ok = w.sub.TryNext(); !ok {
			break
		}
	}
	var err error
	if direct {
		err = cn.cork.send(w.out)
		if cap(w.out) > 2*maxBatchBytes {
			w.out = nil
		}
	} else {
		err = cn.cork.uncork()
	}
	return n, err
}

// encode appends ev's frame to dst: a whole WebSocket message.
func (w *frameWriter) encode(dst []byte, ev eventbus.Event) []byte {
	return appendMessage(dst, ev, w.epoch)
}

// replayVariant numbers the encodings a handler makes of one event for the
// frame cache: with and without "replay":true (the epoch is the handler's).
func replayVariant(ev eventbus.Event) uint8 {
	if ev.Replay {
		return 1
	}
	return 0
}

// skipEvicted returns ev, unless the subscription was evicted: then what
// is still queued is in the replay buffer for the resume, and it returns
// client_evicted, skipping the rest, so that it and the close frame fit in
// the grace. ok is false when nothing is left to write (Next then reports
// the eviction).
func (w *frameWriter) skipEvicted(ev eventbus.Event) (_ eventbus.Event, ok bool) {
	select {
	case <-w.done:
	default:
		return ev, true
	}
	if !errors.Is(w.sub.Err(), eventbus.ErrEvicted) {
		return ev, true
	}
	for ev.Type != frame.TypeClientEvicted {
		if ev, ok = w.sub.TryNext(); !ok {
			return ev, false
		}
	}
	return ev, true
}

// appendMessage appends ev's envelope (resume.AppendEnvelope with epoch)
// as one WebSocket message: a final, unmasked text frame (RFC 6455 §5.2),
// its header then the payload.
func appendMessage(dst []byte, ev eventbus.Event, epoch string) []byte {
	start := len(dst)
	dst = append(dst, 0x81, 126, 0, 0) // FIN, text; room for a 16-bit length
	dst = resume.AppendEnvelope(dst, ev, epoch)
	n := len(dst) - start - 4
	switch {
	case n < 126:
		dst[start+1] = byte(n)
		copy(dst[start+2:], dst[start+4:])
		return dst[:len(dst)-2]
	case n <= 0xFFFF:
		dst[start+2], dst[start+3] = byte(n>>8), byte(n)
		return dst
	}
	dst = append(dst, 0, 0, 0, 0, 0, 0) // a 64-bit length: six more bytes
	copy(dst[start+10:], dst[start+4:len(dst)-6])
	dst[start+1] = 127
	for i := range 8 {
		dst[start+2+i] = byte(uint64(n) >> (56 - 8*i))
	}
	return dst
}

// writeMessage writes ev (a synthetic frame: stream_start, pong) as one
// message, within the write timeout.
func (cn *conn) writeMessage(ev eventbus.Event) error {
	if cn.cork.direct {
		return cn.cork.send(appendMessage(nil, ev, ""))
	}
	b := resume.AppendEnvelope(nil, ev, "")
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if cn.h.wt > 0 {
		ctx, cancel = context.WithTimeout(ctx, cn.h.wt)
	}
	defer cancel()
	return cn.c.Write(ctx, websocket.MessageText, b)
}
