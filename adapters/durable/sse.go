package durable

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// control is an SSE control event's payload (PROTOCOL.md §5.8).
type control struct {
	NextOffset string `json:"streamNextOffset"`
	Cursor     string `json:"streamCursor,omitempty"`
	UpToDate   bool   `json:"upToDate,omitempty"`
	Closed     bool   `json:"streamClosed,omitempty"`
}

// sse serves live=sse: a data event and a control event per batch, from
// the offset on, until the stream closes (a final control event with
// streamClosed), the client goes, or SSEDuration passes.
//
// A text stream's data events are text (a text/* stream of another
// charset than UTF-8 is not text here: it goes in base64, utf8Charset),
// and every one is valid UTF-8: an append that ends inside a character (a
// producer that cut one between two appends) is held, with the appends after it, until an append ends
// between characters — they go out together — and the control event's
// offset stays before it, so a client that resumes from there loses
// nothing. Bytes that are not UTF-8 at all, a stream closed inside a
// character, a run of appends that never ends between characters
// (wholeText's bound) and a cut character whose rest does not come within
// maxHoldTime (2 s) go out with U+FFFD, the text a client's decoder would
// show; catch-up and long-poll reads give the bytes as appended.
func (h *Handler) sse(w http.ResponseWriter, r *http.Request, s *stream, q readReq) error {
	// The first read happens before the answer starts, so an offset the
	// stream no longer holds is a 410, not a broken stream.
	b, err := h.read(r.Context(), s, q.from, 0)
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	if !s.text {
		hd.Set(HeaderSSEEncoding, "base64")
	}
	w.WriteHeader(http.StatusOK)
	h.cnt.sse.Add(1)
	rc := http.NewResponseController(w)
	end := time.Now().Add(h.opts.SSEDuration)
	cur := q.cursor
	pos := b.start       // the offset the client has: its last control event's
	var held []item      // read, not sent: they end inside a character
	var heldAt time.Time // when held began waiting
	var buf bytes.Buffer
	for first := true; ; first = false {
		items := append(held, b.items...)
		closed := b.closed && !b.more
		n := len(items)
		if s.text && !s.json && !closed && (len(held) == 0 || time.Since(heldAt) < maxHoldTime) {
			n = wholeText(items)
		}
		if n < len(items) && (len(held) == 0 || n > 0) {
			heldAt = time.Now()
		}
		held = slices.Clone(items[n:])
		next := b.next
		if len(held) > 0 {
			next = pos
			if n > 0 {
				next = items[n-1].id
			}
		}
		buf.Reset()
		if n > 0 {
			buf.WriteString("event: data\n")
			writeData(&buf, h.sseData(s, items[:n]))
			buf.WriteByte('\n')
		}
		if n > 0 || closed || first && !b.more {
			c := control{NextOffset: h.offset(next), UpToDate: !b.more && len(held) == 0, Closed: closed}
			if !closed {
				cur = cursor(cur)
				c.Cursor = cur
			}
			cj, _ := json.Marshal(c)
			buf.WriteString("event: control\ndata:")
			buf.Write(cj)
			buf.WriteString("\n\n")
			pos = next
		}
		if buf.Len() > 0 && !h.send(w, rc, buf.Bytes()) {
			return nil
		}
		if closed {
			return nil
		}
		left := time.Until(end)
		if left <= 0 || r.Context().Err() != nil {
			return nil
		}
		after, idle := b.next, 0
		for {
			wait := time.Duration(0)
			if !b.more {
				wait = min(left, 15*time.Second)
				if len(held) > 0 {
					wait = max(0, min(wait, time.Until(heldAt.Add(maxHoldTime))))
				}
			}
			b, err = h.read(r.Context(), s, from{after: after}, wait)
			if err != nil {
				return nil // the client resumes from the last control event's offset
			}
			if len(b.items) > 0 || b.closed {
				break
			}
			if len(held) > 0 && time.Since(heldAt) >= maxHoldTime {
				break // the held text goes out as it is
			}
			if b.more { // cut short with nothing to send (an eviction of the reader)
				if idle++; idle > 3 {
					return nil // the client resumes from the last control event's offset
				}
				continue
			}
			if left = time.Until(end); left <= 0 || r.Context().Err() != nil {
				return nil
			}
			// A quiet period: a comment keeps proxies from timing out.
			if !h.send(w, rc, []byte(":\n\n")) {
				return nil
			}
		}
	}
}

// send writes b and flushes it under one WriteTimeout deadline, lifted
// after, and reports whether it went out (a failure is a write error).
func (h *Handler) send(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	h.deadline(w)
	_, err := w.Write(b)
	if err == nil {
		err = rc.Flush()
	}
	h.undeadline(w)
	if err != nil {
		h.cnt.writeErrors.Add(1)
		return false
	}
	return true
}

// maxHoldTime bounds how long a live SSE answer holds text that ends
// inside a character for the append that completes it: past it, the held
// text goes out with U+FFFD for the cut character (and the rest, when it
// comes, with U+FFFD for its orphan bytes), so a writer that never
// completes a character cannot hold a reader's data back. A producer that
// cuts characters between appends sends their rest at once, well within.
const maxHoldTime = 2 * time.Second

// maxHeldItems and maxHeldBytes bound what wholeText holds back: past
// them, a producer that keeps cutting characters between appends gets its
// text sent with U+FFFD where a character was cut, rather than delayed
// without end. The byte bound is well above the appends of a producer that
// copies a byte stream in buffers (io.Copy's 32 KiB), which cut a
// character at two boundaries of three in CJK text: at 64 KiB a run of
// three such appends was sent broken, one boundary in five.
const (
	maxHeldItems = 64
	maxHeldBytes = 1 << 20
)

// wholeText returns how many of a text stream's items to send now: all of
// them, unless their text ends inside a character whose rest has not been
// appended yet; then the items after the last one whose text ends between
// characters wait for the append that completes it (at most maxHeldItems
// and maxHeldBytes: past that, all are sent; the newest append alone is
// held whatever its size: it is already read).
func wholeText(items []item) int {
	size := 0
	for k := len(items); k >= 0; k-- {
		if !endsInsideChar(items[:k]) {
			return k
		}
		held := len(items) - k + 1
		if size += len(items[k-1].data); held > 1 && (held > maxHeldItems || size > maxHeldBytes) {
			break
		}
	}
	return len(items)
}

// endsInsideChar reports whether the text of items ends with the first
// bytes of a UTF-8 sequence that more bytes would complete.
func endsInsideChar(items []item) bool {
	var tail [utf8.UTFMax - 1]byte // the text's last bytes, at most 3
	n := 0
	for i := len(items) - 1; i >= 0 && n < len(tail); i-- {
		d := items[i].data
		for j := len(d) - 1; j >= 0 && n < len(tail); j-- {
			n++
			tail[len(tail)-n] = d[j]
		}
	}
	t := tail[len(tail)-n:]
	for i := len(t) - 1; i >= 0; i-- {
		switch c := t[i]; {
		case c < utf8.RuneSelf:
			return false // ASCII ends a character
		case utf8.RuneStart(c):
			return !utf8.FullRune(t[i:]) // a lead byte: is its sequence whole?
		}
		// a continuation byte: its lead is further back
	}
	return false // no lead within 3 bytes: nothing more can complete it
}

// sseData is one data event's text: the JSON array of a JSON stream's
// messages, a text stream's bytes (what is not UTF-8 as U+FFFD: an SSE
// event is text), or any other stream's bytes in base64.
func (h *Handler) sseData(s *stream, items []item) []byte {
	raw := h.render(s, items)
	if s.text {
		if !utf8.Valid(raw) {
			raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
		}
		return raw
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
	base64.StdEncoding.Encode(out, raw)
	return out
}

// writeData writes text as data: lines, one per line of text (CR LF, CR
// and LF all end a line), so nothing in the payload can end the event or
// start another.
func writeData(buf *bytes.Buffer, text []byte) {
	for {
		i := bytes.IndexAny(text, "\r\n")
		buf.WriteString("data:")
		if len(text) > 0 && text[0] == ' ' {
			buf.WriteByte(' ') // the client strips one leading space
		}
		if i < 0 {
			buf.Write(text)
			buf.WriteByte('\n')
			return
		}
		buf.Write(text[:i])
		buf.WriteByte('\n')
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}
