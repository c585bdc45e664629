package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// ErrFrameTooLarge is returned by [Decoder.Next] when a line or a frame's
// data exceeds the decoder's limit; the stream cannot be read further.
var ErrFrameTooLarge = errors.New("sse: frame too large")

// Frame is one dispatched SSE event as the WHATWG EventSource parser sees it.
type Frame struct {
	// ID is the last event ID buffer at dispatch: the value of the most
	// recent id: field in this stream, which this frame may or may not
	// have carried itself (see HasID). Empty when none was ever set.
	ID string
	// HasID reports whether this frame carried an id: field itself.
	HasID bool
	// Event is the event: field, empty when absent (EventSource then
	// dispatches "message").
	Event string
	// Data is the data: lines joined with "\n", without the final newline.
	Data []byte
}

// Decoder reads SSE frames from a byte stream, the way the seed SDK's
// parseSseStream and the WHATWG EventSource parser do: lines end in "\n",
// "\r\n" or "\r" (also when split across reads); a leading UTF-8 BOM is
// skipped; lines starting with ':' are comments; a field without ':' has an
// empty value; one space after the colon is removed; data: lines join with
// "\n"; an id: containing NUL is ignored; "retry:" with only ASCII digits
// sets [Decoder.Retry]; a blank line dispatches; a frame whose data buffer
// is empty is not dispatched (its id still counts); an unterminated frame at
// end of input is dropped. Unknown fields are ignored.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	r   io.Reader
	max int

	buf      []byte // read buffer; unread bytes are buf[pos:end]
	pos, end int
	err      error // sticky read error
	started  bool  // BOM check done
	skipLF   bool  // the previous line ended in CR: ignore one LF

	line      []byte // a line assembled across reads
	data      []byte
	hasData   bool
	event     string
	lastID    string // the last event ID buffer
	committed string // the last event ID at the latest blank line
	frameID   bool
	retry     time.Duration
	retrySet  bool
	comments  int
}

// NewDecoder returns a Decoder reading from r with the
// resume.DefaultMaxFrameBytes (16 MiB) limit.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: r, max: resume.DefaultMaxFrameBytes, buf: make([]byte, 4096)}
}

// SetMaxFrameBytes bounds the length of one line and of one frame's data;
// n ≤ 0 restores resume.DefaultMaxFrameBytes (16 MiB).
func (d *Decoder) SetMaxFrameBytes(n int) {
	if n <= 0 {
		n = resume.DefaultMaxFrameBytes
	}
	d.max = n
}

// setLastEventID sets the last event ID, as a reconnecting EventSource
// keeps it across connections.
func (d *Decoder) setLastEventID(id string) { d.lastID, d.committed = id, id }

// LastEventID returns the last event ID as an EventSource would send it on
// reconnect: the most recent id: field of a frame that was completed by a
// blank line (dispatched or not), or the value given to setLastEventID.
func (d *Decoder) LastEventID() string { return d.committed }

// Retry returns the last valid retry: value received and whether one was.
func (d *Decoder) Retry() (time.Duration, bool) { return d.retry, d.retrySet }

// Comments returns how many comment lines (heartbeats among them) were read.
func (d *Decoder) Comments() int { return d.comments }

// Next reads until the next frame is dispatched and returns it. The Data
// slice is valid only until the next call. At end of input it returns
// io.EOF (a trailing unterminated frame is dropped); a read error is
// returned as is; [ErrFrameTooLarge] when a limit is crossed.
func (d *Decoder) Next() (Frame, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return Frame{}, err
		}
		if f, ok := d.processLine(line); ok {
			return f, nil
		}
	}
}

// processLine applies one line; it reports a dispatched frame.
func (d *Decoder) processLine(line []byte) (Frame, bool) {
	if len(line) == 0 {
		return d.dispatch()
	}
	if line[0] == ':' {
		d.comments++
		return Frame{}, false
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		d.event = string(value)
	case "data":
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
		d.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.lastID = string(value)
			d.frameID = true
		}
	case "retry":
		if n, ok := parseDigits(value); ok {
			d.retry = time.Duration(n) * time.Millisecond
			d.retrySet = true
		}
	}
	return Frame{}, false
}

func (d *Decoder) dispatch() (Frame, bool) {
	d.committed = d.lastID
	hasData, event, frameID := d.hasData, d.event, d.frameID
	d.hasData, d.event, d.frameID = false, "", false
	if !hasData {
		d.data = d.data[:0]
		return Frame{}, false
	}
	data := d.data[:len(d.data)-1]
	d.data = d.data[:0]
	return Frame{ID: d.lastID, HasID: frameID, Event: event, Data: data}, true
}

// parseDigits parses ASCII digits (capped, so huge values saturate at
// about 292 years instead of overflowing).
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < int64(time.Duration(1<<62)/time.Millisecond) {
			n = n*10 + int64(c-'0')
		}
	}
	return n, true
}

// readLine returns the next line without its terminator. The slice is valid
// until the next call.
func (d *Decoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		if d.pos == d.end {
			if d.err != nil {
				return nil, d.err // a partial line at EOF is dropped
			}
			d.err = d.fill()
			continue
		}
		chunk := d.buf[d.pos:d.end]
		if d.skipLF {
			d.skipLF = false
			if chunk[0] == '\n' {
				d.pos++
				continue
			}
		}
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			i = bytes.IndexByte(chunk, '\r')
		} else if j := bytes.IndexByte(chunk[:i], '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			if len(d.line)+len(chunk) > d.max {
				return nil, ErrFrameTooLarge
			}
			d.line = append(d.line, chunk...)
			d.pos = d.end
			continue
		}
		if len(d.line)+i > d.max || len(d.data)+i > d.max {
			return nil, ErrFrameTooLarge
		}
		d.skipLF = chunk[i] == '\r'
		d.pos += i + 1
		if len(d.line) == 0 {
			return chunk[:i], nil // no copy: the whole line was buffered
		}
		d.line = append(d.line, chunk[:i]...)
		return d.line, nil
	}
}

// fill reads more input into buf, skipping a leading BOM.
func (d *Decoder) fill() error {
	d.pos, d.end = 0, 0
	n, err := d.r.Read(d.buf)
	d.end = n
	if !d.started && n > 0 {
		// The BOM may arrive split across reads; gather up to 3 bytes.
		for d.end < 3 && err == nil && bytes.HasPrefix(bom, d.buf[:d.end]) {
			var m int
			m, err = d.r.Read(d.buf[d.end:])
			d.end += m
		}
		d.started = true
		if bytes.HasPrefix(d.buf[:d.end], bom) {
			d.pos = 3
		}
	}
	if n == 0 && err == nil {
		return nil
	}
	return err
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// DecodeEvent turns a frame written by this package's encoder back into an
// eventbus.Event: ID, Type, Session, Data, Replay and Origin come from the
// JSON envelope (ev.Time is left zero). A frame whose data is not a version-1
// envelope — another server's plain SSE — is still returned: Type is the
// event: field ("message" when absent), ID the frame's own id when it is a
// plain decimal, and Data the data itself when it is valid JSON, else the
// data as a JSON string; the error is then a non-nil [*EnvelopeError] that
// callers may ignore.
func DecodeEvent(f Frame) (eventbus.Event, error) {
	ev, _, err := resume.DecodeEnvelope(f.Data)
	if err == nil {
		return ev, nil
	}
	ev = eventbus.Event{Type: f.Event}
	if ev.Type == "" {
		ev.Type = "message"
	}
	if f.HasID {
		if c, perr := resume.ParseCursor(f.ID); perr == nil && c != nil {
			ev.ID = c.ID
		}
	}
	if json.Valid(f.Data) {
		ev.Data = bytes.Clone(f.Data)
	} else {
		ev.Data, _ = json.Marshal(string(f.Data))
	}
	return ev, &EnvelopeError{Data: string(f.Data), Err: err}
}

// EnvelopeError reports frame data that is not a replaybus envelope.
type EnvelopeError struct {
	Data string // the frame's data
	Err  error  // what is wrong with it
}

// Error quotes the data (cut to 64 bytes) and the decoding problem.
func (e *EnvelopeError) Error() string {
	return "sse: frame data is not an envelope " + textutil.Quote(e.Data, 64) + ": " + e.Err.Error()
}

// Unwrap returns the underlying JSON or shape error.
func (e *EnvelopeError) Unwrap() error { return e.Err }
