package durable

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/replaybus/replaybus/internal/textutil"
)

// ---- create ----

// createReq is a parsed PUT.
type createReq struct {
	ctype     string
	ttl       int64
	expiresAt time.Time
	closed    bool
	forkFrom  string
	forkOff   string
	forkSub   int64
	hasSub    bool
}

var ttlRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})$`)

// parseCreate reads a PUT's headers.
func (h *Handler) parseCreate(r *http.Request) (createReq, error) {
	var c createReq
	c.ctype = r.Header.Get("Content-Type")
	ttl, exp := r.Header.Values(HeaderTTL), r.Header.Get(HeaderExpiresAt)
	if len(ttl) > 0 && exp != "" {
		return c, errorf(http.StatusBadRequest, "invalid_expiry", "give Stream-TTL or Stream-Expires-At, not both")
	}
	if len(ttl) > 0 {
		if len(ttl) > 1 || !ttlRE.MatchString(ttl[0]) {
			return c, errorf(http.StatusBadRequest, "invalid_ttl", "Stream-TTL %s is not a non-negative decimal integer without sign or leading zeros", quote(strings.Join(ttl, ",")))
		}
		c.ttl, _ = strconv.ParseInt(ttl[0], 10, 64)
	}
	if exp != "" {
		t, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			return c, errorf(http.StatusBadRequest, "invalid_expires_at", "Stream-Expires-At %s is not an RFC 3339 time", quote(exp))
		}
		c.expiresAt = t
	}
	c.closed = strings.EqualFold(r.Header.Get(HeaderClosed), "true")
	c.forkFrom = r.Header.Get(HeaderForkedFrom)
	c.forkOff = r.Header.Get(HeaderForkOffset)
	if sub, ok := r.Header[http.CanonicalHeaderKey(HeaderForkSub)]; ok {
		if c.forkFrom == "" {
			return c, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset needs Stream-Forked-From")
		}
		if len(sub) != 1 || !ttlRE.MatchString(sub[0]) {
			return c, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset %s is not a non-negative integer", quote(strings.Join(sub, ",")))
		}
		c.forkSub, _ = strconv.ParseInt(sub[0], 10, 64)
		c.hasSub = c.forkSub > 0
		if c.hasSub && c.forkOff == "" {
			return c, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset needs Stream-Fork-Offset")
		}
	}
	if c.forkOff != "" && c.forkFrom == "" {
		return c, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Offset needs Stream-Forked-From")
	}
	return c, nil
}

// create serves PUT: create, fork, or confirm an existing stream.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, name string) error {
	c, err := h.parseCreate(r)
	if err != nil {
		return err
	}
	body, err := h.body(w, r)
	if err != nil {
		return err
	}
	notify := false
	defer func() { // after h.mu is released: a pull-wake writes a stream
		if notify {
			if s, ok := h.streams.Load(name); ok {
				h.notifySubs(name, s.ownStart())
			}
		}
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.streams.Load(name); ok {
		if s.expired(time.Now()) {
			h.removeLocked(s)
		} else {
			if s.deleted {
				return errorf(http.StatusConflict, "stream_deleted", "stream %s was deleted and is kept for its forks", quote(name))
			}
			return h.confirm(w, s, c)
		}
	}
	var s *stream
	if c.forkFrom != "" {
		s, err = h.fork(r.Context(), name, c)
		if err != nil {
			return err
		}
	} else {
		ct := c.ctype
		if ct == "" {
			ct = "application/octet-stream"
		}
		s = h.newStream(name, ct)
		if h.bus.SessionExists(name) {
			s.base = 0 // serve an existing session with its history
		} else {
			if err := h.bus.CreateSession(name, ""); err != nil {
				return err
			}
			s.base = h.bus.LastEventID()
			s.floor = s.base // what the bus marks lost is the id's earlier lives
		}
		s.tail.Store(s.base)
	}
	s.ttl, s.expiresAt = c.ttl, c.expiresAt
	if s.src != nil && c.ttl == 0 && c.expiresAt.IsZero() {
		s.ttl, s.expiresAt = s.src.ttl, s.src.expiresAt // PROTOCOL.md §4.2's table
	}
	if len(body) > 0 {
		msgs, err := h.split(s, body, true)
		if err != nil {
			h.dropNew(s)
			return err
		}
		for _, m := range msgs {
			if _, err := h.publish(s, m); err != nil {
				h.dropNew(s)
				return err
			}
		}
	}
	h.streams.Store(name, s)
	h.forgotten.Delete(name)
	if s.src != nil {
		s.src.refs++
	}
	if c.closed {
		s.mu.Lock()
		err := h.freeze(r.Context(), s)
		s.closed.Store(true)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	hd := w.Header()
	hd.Set("Location", requestURL(r))
	h.meta(w, s, h.tail(s))
	w.WriteHeader(http.StatusCreated)
	notify = len(body) > 0
	return nil
}

// dropNew undoes a creation that failed half-way.
func (h *Handler) dropNew(s *stream) { _ = h.bus.CloseSession(s.id) }

// confirm answers a PUT on an existing stream: 200 when its configuration
// matches, else 409.
func (h *Handler) confirm(w http.ResponseWriter, s *stream, c createReq) error {
	// No Content-Type means the default (octet-stream), or the source's for a fork.
	typeOK := mediaType(c.ctype) == mediaType(s.ctype) ||
		c.ctype == "" && (s.src != nil || mediaType(s.ctype) == "application/octet-stream")
	// A fork created without expiry took its source's (PROTOCOL.md §4.2).
	expiryOK := c.ttl == s.ttl && c.expiresAt.Equal(s.expiresAt) ||
		s.src != nil && c.ttl == 0 && c.expiresAt.IsZero()
	forkOK := c.forkFrom == "" && s.src == nil ||
		c.forkFrom == s.forkFrom && c.forkSub == s.forkSub && h.sameForkOffset(s, c.forkOff)
	if !typeOK || !expiryOK || !forkOK || c.closed != s.closed.Load() {
		return errorf(http.StatusConflict, "stream_exists", "stream %s exists with another configuration", quote(s.id))
	}
	h.meta(w, s, h.tail(s))
	w.WriteHeader(http.StatusOK)
	return nil
}

// sameForkOffset reports whether off names s's fork offset (or is empty
// and s forked at its source's tail).
func (h *Handler) sameForkOffset(s *stream, off string) bool {
	if off == "" {
		return true
	}
	p, err := ParseOffset(off)
	if err == nil && p.ID == 0 {
		p.ID, p.Epoch = s.src.start(), h.epoch
	}
	return err == nil && p.Epoch == h.epoch && p.ID == s.forkOffset
}

// fork creates stream name as a fork of c.forkFrom.
func (h *Handler) fork(ctx context.Context, name string, c createReq) (*stream, error) {
	srcName, ok := strings.CutPrefix(c.forkFrom, h.opts.Prefix)
	if !ok {
		if u, err := url.Parse(c.forkFrom); err == nil {
			srcName, ok = strings.CutPrefix(u.Path, h.opts.Prefix)
		}
	}
	if !ok || srcName == "" {
		return nil, errorf(http.StatusNotFound, "source_not_found", "Stream-Forked-From %s is not a stream below %s", quote(c.forkFrom), h.opts.Prefix)
	}
	src, ok := h.streams.Load(srcName)
	if ok && src.expired(time.Now()) {
		h.removeLocked(src)
		ok = false
	}
	if !ok {
		return nil, errorf(http.StatusNotFound, "source_not_found", "no stream %s to fork", quote(srcName))
	}
	if src.deleted {
		return nil, errorf(http.StatusConflict, "source_deleted", "stream %s was deleted", quote(srcName))
	}
	if c.ctype != "" && mediaType(c.ctype) != mediaType(src.ctype) {
		return nil, errorf(http.StatusConflict, "content_type_mismatch", "fork content type %s differs from the source's %s", quote(c.ctype), quote(src.ctype))
	}
	tail := h.tail(src)
	at := tail
	if c.forkOff != "" {
		p, err := ParseOffset(c.forkOff)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset: %s", textutil.PublicMessage(err))
		}
		if p.ID == 0 {
			p.ID, p.Epoch = src.start(), h.epoch // names no event: the beginning
		}
		if p.Epoch != h.epoch {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %s is from another epoch", quote(c.forkOff))
		}
		if p.ID > tail {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %s is beyond the source's tail", quote(c.forkOff))
		}
		if p.ID < src.start() {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %s is before the source's start", quote(c.forkOff))
		}
		at = p.ID
	}
	s := h.newStream(name, src.ctype)
	s.src, s.forkFrom, s.forkOffset, s.forkSub = src, c.forkFrom, at, c.forkSub
	s.forkAt = at
	var prefix []byte
	if c.forkSub > 0 {
		left := c.forkSub
		after := at
		for left > 0 {
			b, err := h.read(ctx, src, from{after: after}, 0)
			if err != nil {
				return nil, err
			}
			if len(b.items) == 0 {
				return nil, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset %d names a position past the source's data", c.forkSub)
			}
			if s.json {
				n := min(int64(len(b.items)), left)
				after = b.items[n-1].id
				left -= n
				continue
			}
			first := b.items[0]
			switch {
			case int64(len(first.data)) < left:
				return nil, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset %d is past the next append's %d bytes", c.forkSub, len(first.data))
			case int64(len(first.data)) == left:
				after = first.id
			default:
				prefix = first.data[:left]
			}
			left = 0
		}
		s.forkAt = after
	}
	if err := h.bus.CreateSession(name, ""); err != nil {
		return nil, err
	}
	// The fork's own events follow this id; what the bus marks lost up to
	// it is an earlier life of the name, not the fork's history.
	s.floor = h.bus.LastEventID()
	s.tail.Store(s.forkAt)
	if prefix != nil {
		if _, err := h.publish(s, prefix); err != nil {
			h.dropNew(s)
			return nil, err
		}
	}
	return s, nil
}
