package sse

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// EncodeOptions configure how [AppendEvent], [WriteEvent] and [Encoder]
// write a frame. The zero value writes plain decimal ids.
type EncodeOptions struct {
	// Epoch, when non-empty, makes the id line epoch-qualified:
	// "id: <epoch>-<seq>" instead of "id: <seq>", so that a browser, which
	// cannot send an X-Event-Epoch header, hands the epoch back in
	// Last-Event-ID and a server restart is detected exactly. The envelope's
	// "id" stays the plain number. Bytes that could end a line (CR, LF) or
	// that the WHATWG parser rejects in an id (NUL) are left out.
	Epoch string
	// NoEventField leaves the "event: <type>" line out, so a browser's
	// EventSource dispatches every frame as a plain "message" (its onmessage
	// sees all of them, including types the page registered no listener
	// for); the type is still in the envelope. The handler's
	// ?events=message selects it.
	NoEventField bool
}

// AppendEvent appends ev as one SSE frame to dst and returns the extended
// slice. It allocates only when dst has to grow (and when ev.Data holds raw
// line breaks).
//
// The frame is, in this order:
//
//	id: <seq>            a real event's (ev.ID != 0), or the lastEventId of a snapshot frame
//	                     (resume.SnapshotCursor); "<epoch>-<seq>" with opts.Epoch; none on other frames
//	event: <type>        CR, LF and NUL replaced by '_'; left out when the type is empty
//	data: <envelope>     one JSON object, see below
//	<blank line>
//
// The envelope (resume.AppendEnvelope, without epoch) is
// {"v":1,"id":…,"type":…,"session":…,"data":…,"replay":true,"origin":…}
// with "id" left out for a synthetic frame, "data" left out when ev.Data is
// empty, "replay" only when true and "origin" only when set; a byte payload
// (ev.IsJSON false) is "data" in base64 with "contentType" and
// "encoding":"base64" (resume.AppendEnvelope); a merged event
// of a coalescing subscription (ev.Count ≥ 2) adds "count" and "firstId"
// (its id, and the SSE id, is the last merged event's). Strings are
// escaped as encoding/json escapes them (without HTML escaping; U+2028,
// U+2029 and invalid UTF-8 as encoding/json does), so the envelope line
// never contains a raw CR or LF and the type is carried exactly even when
// the event: line had to be sanitised. A JSON ev.Data is trusted to be the JSON the
// bus encoded at publish; should it hold raw line breaks (pretty-printed
// JSON), the envelope is split over several data: lines at each CR, LF or
// CRLF, which an SSE parser joins back with LF. ev.Time is not written.
//
// AppendEvent is a pure function and safe for concurrent use.
func AppendEvent(dst []byte, ev eventbus.Event, opts EncodeOptions) []byte {
	id, ok := ev.ID, ev.ID != 0
	if !ok {
		id, ok = resume.SnapshotCursor(ev)
	}
	if ok {
		dst = append(dst, "id: "...)
		dst = resume.AppendID(dst, id, opts.Epoch)
		dst = append(dst, '\n')
	}
	if ev.Type != "" && !opts.NoEventField {
		dst = append(dst, "event: "...)
		dst = appendFieldValue(dst, ev.Type)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	mark := len(dst)
	dst = resume.AppendEnvelope(dst, ev, "")
	if ev.IsJSON() && indexLineBreak(ev.Data) >= 0 {
		// Raw line breaks can only come from ev.Data (the envelope's
		// strings are escaped): start a data: line at each. Rare, so the
		// copy is fine.
		env := append([]byte(nil), dst[mark:]...)
		dst = appendDataLines(dst[:mark], env)
	}
	return append(dst, "\n\n"...)
}

// AppendFrame appends f as one SSE frame to dst and returns the extended
// slice: "id: <f.ID>" when f.HasID or f.ID is set, "event: <f.Event>" when
// set, then f.Data as data: lines (a new line at each CR, LF or CRLF in
// it, which a parser joins back with LF; empty Data is one empty data:
// line), and a blank line. CR, LF and NUL in the id and event are
// replaced by '_'. It is the framing of [AppendEvent] for payloads that
// are not the replaybus envelope (other protocols' events), the inverse
// of [Decoder.Next]. It is a pure function, safe for concurrent use.
func AppendFrame(dst []byte, f Frame) []byte {
	if f.HasID || f.ID != "" {
		dst = append(dst, "id: "...)
		dst = appendFieldValue(dst, f.ID)
		dst = append(dst, '\n')
	}
	if f.Event != "" {
		dst = append(dst, "event: "...)
		dst = appendFieldValue(dst, f.Event)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = appendDataLines(dst, f.Data)
	return append(dst, "\n\n"...)
}

// appendComment appends an SSE comment line (": text") and a blank line to
// dst. CR, LF and NUL in text are replaced by '_'. Parsers ignore comments;
// they keep proxies and load balancers from closing an idle stream.
func appendComment(dst []byte, text string) []byte {
	dst = append(dst, ": "...)
	dst = appendFieldValue(dst, text)
	return append(dst, "\n\n"...)
}

// appendRetry appends a "retry: <milliseconds>" line and a blank line to
// dst: it sets the reconnection delay of an EventSource (and of [Client]).
// Negative durations are written as 0.
func appendRetry(dst []byte, d time.Duration) []byte {
	ms := max(d.Milliseconds(), 0)
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, ms, 10)
	return append(dst, "\n\n"...)
}

// WriteEvent writes ev as one SSE frame (see [AppendEvent]) to w with a
// single Write call, using a pooled buffer, and returns w's error. It does
// not flush. It is safe for concurrent use as long as w is.
func WriteEvent(w io.Writer, ev eventbus.Event, opts EncodeOptions) error {
	bp := bufPool.Get().(*[]byte)
	b := AppendEvent((*bp)[:0], ev, opts)
	_, err := w.Write(b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		bufPool.Put(bp)
	}
	return err
}

const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Encoder writes SSE frames to one writer through a buffer it reuses, so that
// in steady state writing a frame allocates nothing. Every method performs
// exactly one Write on the underlying writer (a frame is never split across
// writes) and returns that Write's error. It does not flush.
//
// An Encoder is not safe for concurrent use: the SSE handler gives each
// stream one Encoder driven by one goroutine.
type Encoder struct {
	w    io.Writer
	opts EncodeOptions
	buf  []byte
}

// NewEncoder returns an Encoder writing to w with opts.
func NewEncoder(w io.Writer, opts EncodeOptions) *Encoder {
	// The buffer grows at the first frame: an idle stream (heartbeats
	// only) never needs more than a few bytes of it.
	return &Encoder{w: w, opts: opts}
}

// Encode writes ev as one frame; see [AppendEvent] for the format.
func (e *Encoder) Encode(ev eventbus.Event) error {
	return e.flush(AppendEvent(e.buf[:0], ev, e.opts))
}

// comment writes ": text" and a blank line; see appendComment.
func (e *Encoder) comment(text string) error { return e.flush(appendComment(e.buf[:0], text)) }

// retry writes "retry: <ms>" and a blank line; see appendRetry.
func (e *Encoder) retry(d time.Duration) error { return e.flush(appendRetry(e.buf[:0], d)) }

func (e *Encoder) flush(b []byte) error {
	if cap(b) <= maxPooledBuf {
		e.buf = b // keep the grown buffer, but do not pin one huge frame
	}
	_, err := e.w.Write(b)
	return err
}

// appendFieldValue writes s as the value of an SSE field or comment: a
// CR, LF or NUL would end the line (or, NUL, void an id) and is replaced.
func appendFieldValue(dst []byte, s string) []byte {
	if !hasLineBreakOrNUL(s) {
		return append(dst, s...)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' || c == 0 {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// hasLineBreakOrNUL reports whether s holds CR, LF or NUL.
func hasLineBreakOrNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= '\r' && (c == '\n' || c == '\r' || c == 0) {
			return true
		}
	}
	return false
}

// appendDataLines writes JSON that may contain raw line breaks, starting a
// new "data: " line at each CR, LF or CRLF.
func appendDataLines(dst []byte, data []byte) []byte {
	for {
		i := indexLineBreak(data)
		if i < 0 {
			return append(dst, data...)
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, "\ndata: "...)
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// indexLineBreak returns the index of the first CR or LF in b, or -1.
func indexLineBreak(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	head := b
	if i >= 0 {
		head = b[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}
