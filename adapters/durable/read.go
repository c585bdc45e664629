package durable

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
)

// readReq is a parsed GET query.
type readReq struct {
	offset   string // as given ("" none)
	from     from   // where the read starts (resolved)
	now      bool
	live     string // "", "long-poll", "sse"
	cursor   string
	hasParam bool
}

// parseRead reads a GET's query and resolves its offset on s: "-1" (or
// none) and an offset of id 0 (any epoch: deviation 3) are the beginning
// of what the stream holds, "now"
// its tail (resolved by get), else a FormatOffset value, whose epoch the
// bus judges when the read subscribes (another epoch's is 410
// epoch_reset). An offset of this epoch before the stream's start is 410
// ring_evicted: it is another stream's that had the name (deviation 4).
func (h *Handler) parseRead(r *http.Request, s *stream) (readReq, error) {
	var q readReq
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, errorf(http.StatusBadRequest, resume.CodeInvalidQuery, "the query does not parse: %v", err)
	}
	if offs, ok := vals["offset"]; ok {
		if len(offs) != 1 {
			return q, errorf(http.StatusBadRequest, "invalid_offset", "offset is given %d times", len(offs))
		}
		if offs[0] == "" {
			return q, errorf(http.StatusBadRequest, "invalid_offset", "offset is empty")
		}
		q.offset, q.hasParam = offs[0], true
	}
	q.live = vals.Get("live")
	switch q.live {
	case "", "long-poll", "sse":
	default:
		return q, errorf(http.StatusBadRequest, "invalid_live", "live %s is not long-poll or sse", quote(q.live))
	}
	if q.live != "" && !q.hasParam {
		return q, errorf(http.StatusBadRequest, "missing_offset", "live=%s needs an offset", q.live)
	}
	q.cursor = vals.Get("cursor")
	switch q.offset {
	case "", "-1":
		q.from = from{after: s.start(), start: true}
	case "now":
		q.now = true
	default:
		p, err := ParseOffset(q.offset)
		if err != nil {
			return q, errorf(http.StatusBadRequest, "invalid_offset", "%s", textutil.PublicMessage(err))
		}
		ep := resume.BusEpoch(p.Epoch, h.epoch)
		switch {
		case p.ID == 0:
			q.from = from{after: s.start(), start: true} // names no event: the beginning, as -1, in any epoch
		case ep == h.epoch && p.ID < s.start():
			return q, errorf(http.StatusGone, resume.CodeRingEvicted,
				"offset %s is before the stream's start %s: it is of a stream that had this name before; read from offset -1", quote(q.offset), h.offset(s.start()))
		default:
			q.from = from{after: p.ID, epoch: ep}
		}
	}
	return q, nil
}

// gone is the answer to a read refused with err: a lost position
// (*eventbus.PositionLostError) is 410 epoch_reset or ring_evicted naming
// the client's offset; any other error as it is.
func (h *Handler) gone(err error, offset string) error {
	var lost *eventbus.PositionLostError
	if !errors.As(err, &lost) {
		return err
	}
	if lost.Reason == frame.ReasonEpochReset {
		return errorf(http.StatusGone, resume.CodeEpochReset,
			"offset %s is not of the bus's epoch %s, or is past its newest id (the bus restarted): its history is gone; read from offset -1",
			quote(offset), quote(h.epoch))
	}
	return errorf(http.StatusGone, resume.CodeRingEvicted,
		"events after offset %s are gone from the replay buffer; what it holds follows offset %s (read from there, or from -1)",
		quote(offset), h.offset(lost.CompleteFromID-1))
}

// get serves GET: a catch-up read, a long-poll or an SSE stream.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, name string) error {
	s, err := h.lookup(name)
	if err != nil {
		return err
	}
	q, err := h.parseRead(r, s)
	if err != nil {
		return err
	}
	s.touch()
	if q.now {
		// The tail: nothing the stream holds can be lost after it, so the
		// read is one from the beginning of what is left.
		q.from = from{after: h.tail(s), start: true}
	}
	switch q.live {
	case "sse":
		err = h.sse(w, r, s, q)
	case "long-poll":
		err = h.longPoll(w, r, s, q)
	default:
		err = h.catchUp(w, r, s, q)
	}
	return h.gone(err, q.offset)
}

// catchUp serves a read without live: what is there after the offset.
func (h *Handler) catchUp(w http.ResponseWriter, r *http.Request, s *stream, q readReq) error {
	if q.now {
		h.cnt.reads.Add(1)
		h.meta(w, s, q.from.after)
		hd := w.Header()
		hd.Set(HeaderUpToDate, "true")
		hd.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if s.json {
			_, _ = w.Write([]byte("[]"))
		}
		return nil
	}
	b, err := h.read(r.Context(), s, q.from, 0)
	if err != nil {
		return err
	}
	h.cnt.reads.Add(1)
	h.writeBatch(w, r, s, q, b, false)
	return nil
}

// longPoll serves live=long-poll: data at once when there is some after
// the offset, else the first data within LongPollTimeout (200), else 204.
func (h *Handler) longPoll(w http.ResponseWriter, r *http.Request, s *stream, q readReq) error {
	wait := h.opts.LongPollTimeout
	h.undeadline(w)
	b, err := h.read(r.Context(), s, q.from, wait)
	if err != nil {
		return err
	}
	h.cnt.longPolls.Add(1)
	h.deadline(w)
	h.writeBatch(w, r, s, q, b, true)
	return nil
}

// writeBatch writes a catch-up or long-poll answer.
func (h *Handler) writeBatch(w http.ResponseWriter, r *http.Request, s *stream, q readReq, b batch, live bool) {
	hd := w.Header()
	closed := b.closed && !b.more
	h.meta(w, s, b.next)
	hd.Del(HeaderClosed)
	if closed {
		hd.Set(HeaderClosed, "true")
	}
	if !b.more {
		hd.Set(HeaderUpToDate, "true")
	}
	if !closed || live {
		if !closed {
			hd.Set(HeaderCursor, cursor(q.cursor))
		}
	}
	if live && len(b.items) == 0 {
		hd.Del("Content-Type")
		hd.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	start := q.offset
	if start == "" || q.now {
		start = h.offset(q.from.after)
	}
	tag := etag(s, start, h.offset(b.next), closed)
	hd.Set("ETag", tag)
	hd.Set("Cache-Control", "public, max-age=60, stale-while-revalidate=300")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := h.render(s, b.items)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// etagMatch reports whether an If-None-Match value lists tag.
func etagMatch(inm, tag string) bool {
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}

// render is items as a response body: a JSON array for a JSON stream, the
// bytes one after another otherwise.
func (h *Handler) render(s *stream, items []item) []byte {
	n := 2
	for _, it := range items {
		n += len(it.data) + 1
	}
	buf := make([]byte, 0, n)
	if s.json {
		buf = append(buf, '[')
	}
	for i, it := range items {
		if s.json && i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it.data...)
	}
	if s.json {
		buf = append(buf, ']')
	}
	return buf
}
