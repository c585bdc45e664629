package sse

import (
	"net/http"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus"
)

// Bounds of one batch: frames and bytes written before the flush.
const (
	maxBatchFrames = 64
	maxBatchBytes  = 64 << 10
)

// batch writes ev and then every frame sub has ready, taken with NextBatch
// into a pooled buffer (an idle stream holds none) up to maxBatchFrames at
// a time, without the final flush: a full batch, or frames past
// maxBatchBytes, are flushed and the rest follows under a new deadline. It
// returns how many frames it wrote.
func (sw *streamWriter) batch(w http.ResponseWriter, sub *eventbus.Subscription, ev eventbus.Event, enc EncodeOptions) (int, error) {
	bp := batchBufs.Get().(*[maxBatchFrames]eventbus.Event)
	used := 1 // bp[:used] may hold frames
	defer func() {
		clear(bp[:used]) // the pool must not pin the frames' data
		batchBufs.Put(bp)
	}()
	bp[0] = ev
	n := 0
	for k := 1; ; k = 0 {
		m, _ := sub.NextBatch(readyNow, bp[k:]) // ErrTimeout or the end: nothing more is ready
		k += m
		used = max(used, k)
		bytes := 0
		for i := range bp[:k] {
			var b []byte
			if sw.h.active.Load() > 1 {
				b, sw.scratch = sw.h.cache.frame(bp[i], enc, sw.scratch)
			} else {
				b = AppendEvent(sw.scratch[:0], bp[i], enc)
				sw.scratch = b
			}
			if _, err := w.Write(b); err != nil {
				return n, err
			}
			if cap(sw.scratch) > maxPooledBuf {
				sw.scratch = nil // do not pin one huge frame
			}
			n++
			bytes += len(b)
			if bytes >= maxBatchBytes && i+1 < k {
				if err := sw.flushAndGoOn(); err != nil {
					return n, err
				}
				bytes = 0
			}
		}
		if k < maxBatchFrames {
			return n, nil
		}
		if err := sw.flushAndGoOn(); err != nil { // a full batch: more may be ready
			return n, err
		}
	}
}

// flushAndGoOn flushes what a batch wrote so far and sets the deadline
// for the rest.
func (sw *streamWriter) flushAndGoOn() error {
	if err := sw.end(nil); err != nil {
		return err
	}
	sw.begin()
	return nil
}

// batchBufs holds the streams' batch buffers between batches.
var batchBufs = sync.Pool{New: func() any { return new([maxBatchFrames]eventbus.Event) }}

// readyNow is a deadline already past: NextBatch returns what is ready.
var readyNow = time.Unix(1, 0)
