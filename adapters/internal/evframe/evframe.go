package evframe

import (
	"strconv"

	"github.com/replaybus/replaybus/adapters/sse"
)

// Frame is one queued frame: the event it came from and its data.
type Frame struct {
	Event uint64
	Data  []byte
	// Opens and Closes name what the frame opens or closes, for an
	// encoder that must open it again on a new connection (agui).
	Opens, Closes string
}

// Queue holds the frames of the events an encoder is writing. The zero
// value writes plain ids and skips nothing.
type Queue struct {
	// Epoch, when set, qualifies the ids: "<epoch>-<seq>".
	Epoch   string
	skip    int // > 0: the next skip frames; < 0: all
	pending []Frame
}

// Add queues f.
func (q *Queue) Add(f Frame) { q.pending = append(q.pending, f) }

// Skip sets how many of the next frames Flush computes but does not
// write: n > 0 the next n, n < 0 every one until Skip is called again, 0
// none.
func (q *Queue) Skip(n int) { q.skip = n }

// Skipping reports whether the next frame would be skipped.
func (q *Queue) Skipping() bool { return q.skip != 0 }

// Flush appends the queued frames to dst with their ids, except the ones
// skipped, and empties the queue. each, when set, is called first for
// every frame, written or skipped, with written saying which, and may
// append to dst what must come before it.
func (q *Queue) Flush(dst []byte, each func(dst []byte, f Frame, written bool) []byte) []byte {
	for i, f := range q.pending {
		written := q.skip == 0
		if each != nil {
			dst = each(dst, f, written)
		}
		if !written {
			if q.skip > 0 {
				q.skip--
			}
			continue
		}
		var id string
		if f.Event != 0 {
			id = q.Cursor(f.Event)
			if i+1 < len(q.pending) && q.pending[i+1].Event == f.Event {
				k := 0
				for j := i - 1; j >= 0 && q.pending[j].Event == f.Event; j-- {
					k++
				}
				id += ":" + strconv.Itoa(k)
			}
		}
		dst = sse.AppendFrame(dst, sse.Frame{ID: id, Data: f.Data})
	}
	clear(q.pending)
	q.pending = q.pending[:0]
	return dst
}

// Cursor returns the id of event seq: "<epoch>-<seq>", or "<seq>".
func (q *Queue) Cursor(seq uint64) string {
	s := strconv.FormatUint(seq, 10)
	if q.Epoch != "" {
		return q.Epoch + "-" + s
	}
	return s
}
