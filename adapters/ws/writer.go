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
// event's envelope taken from the handler's cache (encoded once for every
// connection) and framed by coder/websocket.
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
	scratch []byte // envelopes not taken from the cache are encoded here
}

// batch writes ev and every frame sub has ready after it, up to the batch
// bounds, and sends them; it returns how many frames it wrote.
// coder/websocket frames (and, when negotiated, compresses) every message:
// Conn.Write only reads the envelope (it copies it into its buffer or the
// cork), so the cache's shared bytes stay intact. The cork collects the
// frames and uncork sends the batch with one write under one write
// deadline; no message has a context or timer of its own.
func (w *frameWriter) batch(ev eventbus.Event) (int, error) {
	cn := w.cn
	cn.cork.corkWrites()
	n, size := 0, 0
	for {
		var ok bool
		if ev, ok = w.skipEvicted(ev); !ok {
			break
		}
		var msg []byte
		if cn.h.active.Load() > 1 {
			msg, w.scratch = cn.h.cache.Frame(ev, replayVariant(ev), w.scratch, w.encode)
		} else {
			msg = w.encode(w.scratch[:0], ev)
			w.scratch = msg
		}
		if err := cn.c.Write(context.Background(), websocket.MessageText, msg); err != nil {
			_ = cn.cork.uncork()
			return n, err
		}
		size += len(msg)
		if cap(w.scratch) > maxBatchBytes {
			w.scratch = nil // do not pin one huge envelope
		}
		n++
		if n >= maxBatch || size >= maxBatchBytes {
			break
		}
		if ev, ok = w.sub.TryNext(); !ok {
			break
		}
	}
	return n, cn.cork.uncork()
}

// encode appends ev's envelope (the payload of its message) to dst.
func (w *frameWriter) encode(dst []byte, ev eventbus.Event) []byte {
	return resume.AppendEnvelope(dst, ev, w.epoch)
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

// writeMessage writes ev (a synthetic frame: stream_start, pong) as one
// message, within the write timeout.
func (cn *conn) writeMessage(ev eventbus.Event) error {
	b := resume.AppendEnvelope(nil, ev, "")
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if cn.h.wt > 0 {
		ctx, cancel = context.WithTimeout(ctx, cn.h.wt)
	}
	defer cancel()
	return cn.c.Write(ctx, websocket.MessageText, b)
}
