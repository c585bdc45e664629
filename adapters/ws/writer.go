package ws

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// maxBatch bounds the frames written between two flushes.
const maxBatch = 64

// writeLoop writes every frame of sub until the subscription or the
// connection ends, then closes with the code the end calls for. Frames that
// are ready together go out with one flush (corkConn), up to maxBatch.
func (cn *conn) writeLoop(sub *eventbus.Subscription) {
	w := frameWriter{cn: cn, sub: sub, done: sub.Done(), buf: make([]byte, 0, 1024)}
	if !cn.h.o.PlainIDs {
		w.epoch = cn.h.bus.Epoch()
	}
	for {
		ev, err := sub.Next(cn.ctx)
		if err != nil {
			cn.closeEnded(err)
			return
		}
		cn.cork.corkWrites()
		ok := w.write(ev)
		for n := 1; ok && n < maxBatch; n++ {
			ev, more := sub.TryNext()
			if !more {
				break
			}
			ok = w.write(ev)
		}
		if err := cn.cork.uncork(); err != nil || !ok {
			if cn.ctx.Err() == nil || cn.h.streams.Closed() {
				cn.h.writeErrors.Add(1)
			}
			cn.abort()
			return
		}
	}
}

// frameWriter writes single frames for writeLoop.
type frameWriter struct {
	cn    *conn
	sub   *eventbus.Subscription
	epoch string
	done  <-chan struct{}
	buf   []byte
}

// write writes ev as one text message; false when the write failed.
func (w *frameWriter) write(ev eventbus.Event) bool {
	select {
	case <-w.done:
		if errors.Is(w.sub.Err(), eventbus.ErrEvicted) && ev.Type != frame.TypeClientEvicted {
			// Evicted: what is still queued is in the replay buffer for
			// the resume; go straight to client_evicted so that it and
			// the close frame fit in the grace.
			for ev.Type != frame.TypeClientEvicted {
				var ok bool
				if ev, ok = w.sub.TryNext(); !ok {
					return true // nothing left: Next reports the eviction
				}
			}
		}
	default:
	}
	w.buf = resume.AppendEnvelope(w.buf[:0], ev, w.epoch)
	// No context deadline: the bytes go to the cork, and every socket
	// write has its deadline there (a context would cost a timer per frame).
	if err := w.cn.c.Write(context.Background(), websocket.MessageText, w.buf); err != nil {
		return false
	}
	w.cn.h.frames.Add(1)
	if cap(w.buf) > 64<<10 {
		w.buf = make([]byte, 0, 1024)
	}
	return true
}
