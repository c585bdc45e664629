package durable

import (
	"context"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// lookup returns the live stream named name: 404 when there is none (an
// expired one is removed first), 410 when it is soft-deleted. A bus
// session that exists without a record (created by another route) is
// served as an application/json stream; one the bus knows as closed by
// another route is 410 session_closed, as on every route (an append
// makes it 409, statusOf), unless this handler deleted or expired it
// (then it is the protocol's deleted stream, 404).
func (h *Handler) lookup(name string) (*stream, error) {
	s, ok := h.streams.Load(name)
	if ok && s.expired(time.Now()) {
		h.remove(s)
		ok = false
	}
	if !ok {
		if !h.bus.SessionExists(name) {
			if _, gone := h.forgotten.Load(name); !gone && h.bus.SessionClosed(name) {
				return nil, resume.StatusFor(eventbus.ErrSessionClosed, name)
			}
			return nil, errorf(http.StatusNotFound, resume.CodeSessionNotFound, "no stream %s", quote(name))
		}
		h.forgotten.Delete(name) // created again by another route
		h.mu.Lock()
		if s, ok = h.streams.Load(name); !ok {
			s = h.newStream(name, "application/json")
			s.implicit = true
			h.streams.Store(name, s)
		}
		h.mu.Unlock()
	}
	s.seen.Store(time.Now().UnixNano())
	h.mu.Lock()
	deleted := s.deleted
	h.mu.Unlock()
	if deleted {
		return nil, errorf(http.StatusGone, "stream_deleted", "stream %s was deleted (its forks still read it)", quote(name))
	}
	return s, nil
}

// maxMediaTypes bounds the distinct media types a Handler has the bus
// intern for its byte streams: a quarter of the 4,096 a process keeps for
// good (eventbus.Bus.PublishBytes), so that clients creating streams of
// ever new content types cannot use up the table the application's own
// byte payloads need.
const maxMediaTypes = 1024

// newStream makes a record for session name of content type ct. A byte
// stream's appends are published as bytes of media type ct, or of
// application/octet-stream when the bus refuses ct as a media type, or
// when ct is a new one and the handler has already had maxMediaTypes
// interned (the stream still answers with ct: PROTOCOL.md lets a client
// name any content type).
func (h *Handler) newStream(name, ct string) *stream {
	mt := mediaType(ct)
	s := &stream{id: name, gen: h.gen.Add(1), ctype: ct, json: mt == "application/json"}
	s.media = "application/octet-stream"
	if !s.json && h.mayIntern(ct) {
		if _, err := (eventbus.Event{}).WithContentType(ct); err == nil {
			s.media = ct
		}
	}
	s.text = s.json || strings.HasPrefix(mt, "text/") && utf8Charset(ct)
	s.touch()
	s.seen.Store(s.access.Load())
	return s
}

// utf8Charset reports whether content type ct's text is UTF-8: a charset
// parameter of utf-8 or us-ascii (a subset), any case, or none (RFC 6657:
// new text/* types default to UTF-8; the handler reads them so). A text
// stream of another charset (iso-8859-1, shift_jis, utf-16…) is not
// UTF-8 text: over SSE it is sent as bytes, in base64.
func utf8Charset(ct string) bool {
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return true // newStream's callers have checked ct; an odd one stays text, U+FFFD where not UTF-8
	}
	switch strings.ToLower(params["charset"]) {
	case "", "utf-8", "utf8", "us-ascii":
		return true
	}
	return false
}

// remove deletes s (DELETE, expiry, the sweep): a soft delete while forks
// read it (its content is kept, frozen), else the record goes, its session
// is closed (the bus frees it) and its source's reference drops, cascading
// to a soft-deleted source. The name is remembered in h.forgotten (it
// reads as deleted, 404, not as closed, 410) while the bus remembers the
// closed id.
func (h *Handler) remove(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(s)
}

// removeLocked is remove with h.mu held.
func (h *Handler) removeLocked(s *stream) {
	if cur, ok := h.streams.Load(s.id); !ok || cur != s {
		return
	}
	if s.refs > 0 {
		if !s.deleted {
			s.deleted = true
			s.mu.Lock()
			_ = h.freeze(context.Background(), s)
			s.mu.Unlock()
		}
		return
	}
	h.streams.Delete(s.id)
	h.forgotten.Store(s.id, struct{}{})
	if s.frozen.Load() == nil {
		_ = h.bus.CloseSession(s.id)
	}
	if src := s.src; src != nil {
		src.refs--
		if src.deleted && src.refs == 0 {
			src.deleted = false
			h.removeLocked(src)
		}
	}
}

// sweepEvery is the least time between two sweeps of the records.
const sweepEvery = time.Second

// maybeSweep runs sweep when sweepEvery has passed since the last one.
func (h *Handler) maybeSweep() {
	now := time.Now().UnixNano()
	last := h.swept.Load()
	if now-last >= int64(sweepEvery) && h.swept.CompareAndSwap(last, now) {
		h.sweep(time.Unix(0, now))
	}
}

// sweep drops the records nobody can read any more, so the handler's
// memory follows the bus's: a stream past its TTL or expiry time (as a
// request for it would); a record made for another route's session once
// the bus no longer has that session (expired, or closed: it reads as
// closed, 410, as on the other routes); and a closed stream, whose content
// the handler holds, unseen for the bus's SessionTTL (the time the bus
// remembers a closed session's id). A deleted name is forgotten once the
// bus no longer remembers its id as closed.
func (h *Handler) sweep(now time.Time) {
	idle := int64(h.bus.Options().SessionTTL)
	h.streams.Range(func(_ string, s *stream) bool {
		closedElsewhere := false
		switch {
		case s.expired(now):
		case s.implicit && s.frozen.Load() == nil && !h.bus.SessionExists(s.id):
			closedElsewhere = true
		case s.frozen.Load() != nil && idle > 0 && now.UnixNano()-s.seen.Load() >= idle:
		default:
			return true
		}
		h.mu.Lock()
		h.removeLocked(s)
		if closedElsewhere {
			h.forgotten.Delete(s.id)
		}
		h.mu.Unlock()
		return true
	})
	h.forgotten.Range(func(name string, _ struct{}) bool {
		if !h.bus.SessionClosed(name) {
			h.forgotten.Delete(name)
		}
		return true
	})
}

// mayIntern reports whether the bus may be asked to intern media type ct
// for a stream: one the handler had interned before, or a new one while
// it has had fewer than maxMediaTypes interned (then it counts it). A
// malformed ct is let through: the bus refuses it without interning.
func (h *Handler) mayIntern(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return true
	}
	canon := mime.FormatMediaType(mt, params)
	h.mediaMu.Lock()
	defer h.mediaMu.Unlock()
	if _, ok := h.media[canon]; ok {
		return true
	}
	if len(h.media) >= maxMediaTypes {
		return false
	}
	if h.media == nil {
		h.media = make(map[string]struct{})
	}
	h.media[canon] = struct{}{}
	return true
}
