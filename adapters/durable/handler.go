package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Pattern is the route the example server mounts the handler on, and the
// default HandlerOptions.Prefix: the conformance suite's stream URLs are
// <base>/v1/stream/<name>.
const Pattern = "/v1/stream/"

// Defaults of HandlerOptions' zero fields.
const (
	DefaultLongPollTimeout = 20 * time.Second // HandlerOptions.LongPollTimeout: PROTOCOL.md leaves it to the server; the suite's default
	DefaultSSEDuration     = 60 * time.Second // HandlerOptions.SSEDuration: PROTOCOL.md §10.2's "about 60 seconds"
	DefaultChunkBytes      = 1 << 20          // HandlerOptions.ChunkBytes: 1 MiB of stream data per catch-up answer
	DefaultMaxBodyBytes    = 8 << 20          // HandlerOptions.MaxBodyBytes: 8 MiB per PUT or POST body
	DefaultWriteTimeout    = 10 * time.Second // HandlerOptions.WriteTimeout: per write, as the SSE handler's
	DefaultEventType       = "durable"        // HandlerOptions.EventType: the bus event type of appended items
)

// Protocol header names (PROTOCOL.md §13.2), as the handler reads and
// writes them.
const (
	HeaderNextOffset  = "Stream-Next-Offset"       // the offset to read from next (every answer about a stream)
	HeaderUpToDate    = "Stream-Up-To-Date"        // "true": the answer reaches the tail
	HeaderCursor      = "Stream-Cursor"            // the CDN collapsing cursor of live answers (§10.1)
	HeaderClosed      = "Stream-Closed"            // "true": closed (on a request: close it)
	HeaderTTL         = "Stream-TTL"               // sliding time-to-live, whole seconds
	HeaderExpiresAt   = "Stream-Expires-At"        // absolute expiry, RFC 3339
	HeaderSeq         = "Stream-Seq"               // writer sequence, compared byte-wise, per stream
	HeaderForkedFrom  = "Stream-Forked-From"       // a fork's source path
	HeaderForkOffset  = "Stream-Fork-Offset"       // a fork's divergence offset
	HeaderForkSub     = "Stream-Fork-Sub-Offset"   // messages (JSON) or bytes past the fork offset
	HeaderProducerID  = "Producer-Id"              // idempotent producer id (§5.2.1)
	HeaderProducerEp  = "Producer-Epoch"           // idempotent producer epoch, 0 … 2^53−1
	HeaderProducerSeq = "Producer-Seq"             // idempotent producer sequence, 0 … 2^53−1
	HeaderExpectedSeq = "Producer-Expected-Seq"    // on a 409 sequence gap: the sequence expected
	HeaderReceivedSeq = "Producer-Received-Seq"    // on a 409 sequence gap: the sequence received
	HeaderSSEEncoding = "Stream-SSE-Data-Encoding" // "base64" on SSE answers of non-text streams
)

// HandlerOptions configure a Handler. The zero value serves under Pattern
// with the defaults below.
type HandlerOptions struct {
	// Prefix is the URL path the handler is mounted on, ending in '/';
	// the rest of the path is the stream's name and its bus session id.
	// Stream-Forked-From paths are read below it too. Default Pattern.
	Prefix string
	// LongPollTimeout is how long a live=long-poll read waits for data
	// before it answers 204. Range 0–5 min; zero means
	// DefaultLongPollTimeout (20 s).
	LongPollTimeout time.Duration
	// SSEDuration is how long a live=sse response lasts before the
	// handler ends it (PROTOCOL.md §10.2: about 60 s, so caches can
	// collapse clients; the client reconnects from the last offset).
	// Zero means DefaultSSEDuration.
	SSEDuration time.Duration
	// ChunkBytes bounds one catch-up response's body, in bytes of stream
	// data (one item is always sent, however large). Zero means
	// DefaultChunkBytes (1 MiB).
	ChunkBytes int
	// MaxBodyBytes bounds a PUT or POST body; a larger one is 413. Zero
	// means DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// WriteTimeout bounds each write of an answer (set before it, so a
	// long-poll's wait or an SSE stream's life is not bounded, only each
	// write). Zero means DefaultWriteTimeout (10 s); negative sets none.
	WriteTimeout time.Duration
	// EventType is the bus event type of the events the handler publishes
	// (each JSON message, or each append of another content type). Events
	// of other types, published into the session by other routes, read as
	// a JSON envelope {"id","type","data","origin"}. Default
	// DefaultEventType ("durable").
	EventType string
	// Logger receives one debug record per refused request and the
	// handler's errors; nil discards them.
	Logger *slog.Logger
	// Subscriptions turns on PROTOCOL.md's subscription APIs (§6–7) below
	// <Prefix>__ds/: webhook subscriptions (signed with an Ed25519 key made
	// at NewHandler, published at <Prefix>__ds/jwks.json) and pull-wake
	// subscriptions, over the appends made through this handler. Off by
	// default (the paths answer 501); with it on, call Handler.Close at
	// shutdown.
	Subscriptions bool
}

// Handler serves bus sessions as Durable Streams (PROTOCOL.md of
// durable-streams/durable-streams): PUT creates (or forks), POST appends
// and closes, GET reads (catch-up, long-poll, SSE), HEAD reports and
// DELETE deletes a stream named by the path below HandlerOptions.Prefix,
// whose data is the bus session of that id. docs/durable-streams.md maps
// each part of the protocol onto the bus. Create one with NewHandler.
//
// It keeps per stream what the bus does not: the content type, TTL or
// expiry, closure (and the producer request that closed it), the
// Stream-Seq, the fork link, and a closed stream's final content (closing a
// stream closes its session, whose buffer the bus frees). Idempotent
// producers are the bus's: Producer-Id/-Epoch/-Seq become
// eventbus.WithProducer on the append's first event, checked and recorded
// with it (eventbus.Bus.CheckProducer first, so that a duplicate is known
// before the Stream-Seq check). All methods are safe for concurrent use;
// appends to one stream are serialised, reads never take its lock.
type Handler struct {
	bus   *eventbus.Bus
	epoch string
	opts  HandlerOptions
	chunk int
	log   *slog.Logger

	streams *xsync.MapOf[string, *stream]
	mu      sync.Mutex // creation, deletion, fork reference counts
	gen     atomic.Uint64
	swept   atomic.Int64 // Unix ns of the last sweep
	subs    *subsState   // nil without HandlerOptions.Subscriptions
}

// NewHandler returns a Handler serving bus's sessions. Errors name the
// bad value: a nil bus, a Prefix not starting and ending with '/', a
// LongPollTimeout outside 0–5 min, a negative ChunkBytes, MaxBodyBytes or
// SSEDuration, an EventType the bus refuses.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil {
		return nil, errors.New("durable: nil bus")
	}
	if o.Prefix == "" {
		o.Prefix = Pattern
	}
	if !strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("durable: Prefix %q must start and end with '/'", o.Prefix)
	}
	switch {
	case o.LongPollTimeout < 0 || o.LongPollTimeout > 5*time.Minute:
		return nil, fmt.Errorf("durable: LongPollTimeout %v out of range 0–5m", o.LongPollTimeout)
	case o.LongPollTimeout == 0:
		o.LongPollTimeout = DefaultLongPollTimeout
	}
	if o.ChunkBytes < 0 || o.MaxBodyBytes < 0 || o.SSEDuration < 0 {
		return nil, fmt.Errorf("durable: negative ChunkBytes %d, MaxBodyBytes %d or SSEDuration %v",
			o.ChunkBytes, o.MaxBodyBytes, o.SSEDuration)
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.SSEDuration == 0 {
		o.SSEDuration = DefaultSSEDuration
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.EventType == "" {
		o.EventType = DefaultEventType
	}
	if frame.Reserved(o.EventType) || strings.ContainsAny(o.EventType, "\r\n") {
		return nil, fmt.Errorf("durable: EventType %q is reserved or has a line break", o.EventType)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{bus: bus, epoch: bus.Epoch(), opts: o, chunk: o.ChunkBytes, log: o.Logger,
		streams: xsync.NewMapOf[string, *stream]()}
	if o.Subscriptions {
		h.subs = newSubsState()
	}
	return h, nil
}

// Prefix returns the path the handler serves below (HandlerOptions.Prefix,
// Pattern by default). Safe for concurrent use.
func (h *Handler) Prefix() string { return h.opts.Prefix }

// httpError is an error answer: its status, code and message.
type httpError struct {
	status  int
	code    string
	message string
	hdr     map[string]string
}

func (e *httpError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// with adds a header to the error answer.
func (e *httpError) with(k, v string) *httpError {
	if e.hdr == nil {
		e.hdr = map[string]string{}
	}
	e.hdr[k] = v
	return e
}

// ServeHTTP serves one request on a stream URL; see docs/durable-streams.md
// for each answer. Besides the protocol's, it answers OPTIONS (CORS
// preflight) with 204 and any other method with 405. Errors are JSON
// {"code","message"}: 400 for a bad header, offset, body or stream name
// (the message names the value), 404 for an unknown stream, 409 for a
// conflict (closed stream, content type, Stream-Seq, producer gap), 410 for
// an offset before what is held or of another epoch (code ring_evicted) or a
// soft-deleted stream, 413 for a body over MaxBodyBytes, 429 with
// Retry-After when the session has eventbus.Options.MaxSubscribers
// readers, 503 once the bus is closed.
//
// A long-poll blocks up to LongPollTimeout and an SSE answer lasts up to
// SSEDuration (both end early when the client goes or the stream closes);
// everything else answers at once. Each write is bounded by WriteTimeout.
// Safe for concurrent use.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Access-Control-Expose-Headers", exposed)
	h.deadline(w)
	h.maybeSweep()
	name, ok := strings.CutPrefix(r.URL.Path, h.opts.Prefix)
	if !ok || name == "" {
		h.fail(w, r, errorf(http.StatusNotFound, "not_found", "no stream at %q (streams are below %s)", r.URL.Path, h.opts.Prefix))
		return
	}
	if name == "__ds" || strings.HasPrefix(name, "__ds/") {
		if h.subs != nil {
			h.serveDS(w, r, strings.TrimPrefix(name, "__ds/"))
			return
		}
		h.fail(w, r, errorf(http.StatusNotImplemented, "not_implemented",
			"%s__ds is reserved for Durable Streams control APIs (subscriptions), which this handler does not offer (HandlerOptions.Subscriptions)", h.opts.Prefix))
		return
	}
	if err := eventbus.CheckSessionID(name); err != nil {
		h.fail(w, r, errorf(http.StatusBadRequest, "invalid_stream_name", "%v", err))
		return
	}
	var err error
	switch r.Method {
	case http.MethodPut:
		err = h.create(w, r, name)
	case http.MethodPost:
		err = h.append(w, r, name)
	case http.MethodGet:
		err = h.get(w, r, name)
	case http.MethodHead:
		err = h.head(w, r, name)
	case http.MethodDelete:
		err = h.delete(w, r, name)
	case http.MethodOptions:
		hd.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
		hd.Set("Access-Control-Allow-Headers", allowed)
		hd.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
	default:
		hd.Set("Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
		err = errorf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s not allowed on a stream", r.Method)
	}
	if err != nil {
		h.fail(w, r, err)
	}
}

const (
	exposed = "Stream-Next-Offset, Stream-Up-To-Date, Stream-Cursor, Stream-Closed, Stream-TTL, " +
		"Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, " +
		"Producer-Received-Seq, ETag, Location, Content-Type"
	allowed = "Content-Type, If-None-Match, Stream-TTL, Stream-Expires-At, Stream-Closed, Stream-Seq, " +
		"Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset, Producer-Id, Producer-Epoch, Producer-Seq, " +
		"Authorization"
)

// deadline bounds the next write by WriteTimeout.
func (h *Handler) deadline(w http.ResponseWriter) {
	if h.opts.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	}
}

// fail writes err as a JSON error answer {"code","message"}.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = h.busError(err)
	}
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "durable: refused", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Int("status", he.status), slog.String("message", he.message))
	hd := w.Header()
	for k, v := range he.hdr {
		hd.Set(k, v)
	}
	hd.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(he.status)
		return
	}
	hd.Set("Content-Type", "application/json; charset=utf-8")
	b, _ := json.Marshal(map[string]string{"code": he.code, "message": he.message})
	w.WriteHeader(he.status)
	_, _ = w.Write(append(b, '\n'))
}

// busError maps a bus error onto an answer.
func (h *Handler) busError(err error) *httpError {
	switch {
	case errors.Is(err, errGone):
		return errorf(http.StatusGone, "ring_evicted", "the offset is before what the stream still holds (the replay buffer evicted it, or it is from another epoch)")
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return errorf(http.StatusTooManyRequests, "subscriber_limit_exceeded", "%v", err).with("Retry-After", "1")
	case errors.Is(err, eventbus.ErrInvalid):
		return errorf(http.StatusBadRequest, "invalid_argument", "%v", err)
	case errors.Is(err, errors.ErrUnsupported):
		return errorf(http.StatusNotImplemented, "not_implemented", "%v", err)
	case errors.Is(err, eventbus.ErrClosed):
		return errorf(http.StatusServiceUnavailable, "unavailable", "the bus is closed")
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return errorf(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, eventbus.ErrSessionClosed):
		return errorf(http.StatusConflict, "stream_closed", "the session was closed: %v", err).with(HeaderClosed, "true")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, "unavailable", "%v", err)
	}
	h.log.Error("durable: bus error", slog.Any("err", err))
	return errorf(http.StatusInternalServerError, "internal_error", "%v", err)
}

// lookup returns the live stream named name: 404 when there is none (an
// expired one is removed first), 410 when it is soft-deleted. A bus
// session that exists without a record (created by another route) is
// served as an application/json stream.
func (h *Handler) lookup(name string) (*stream, error) {
	s, ok := h.streams.Load(name)
	if ok && s.expired(time.Now()) {
		h.remove(s)
		ok = false
	}
	if !ok {
		if !h.bus.SessionExists(name) {
			return nil, errorf(http.StatusNotFound, "not_found", "no stream %q", name)
		}
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
		return nil, errorf(http.StatusGone, "stream_deleted", "stream %q was deleted (its forks still read it)", name)
	}
	return s, nil
}

// newStream makes a record for session name of content type ct.
func (h *Handler) newStream(name, ct string) *stream {
	mt := mediaType(ct)
	s := &stream{id: name, gen: h.gen.Add(1), ctype: ct, json: mt == "application/json"}
	s.text = s.json || strings.HasPrefix(mt, "text/")
	s.touch()
	s.seen.Store(s.access.Load())
	return s
}

// remove deletes s (DELETE, expiry, the sweep): a soft delete while forks
// read it (its content is kept, frozen), else the record goes, its session
// is closed (the bus frees it) and its source's reference drops, cascading
// to a soft-deleted source.
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
// the bus no longer has that session (expired, closed and forgotten); and
// a closed stream, whose content the handler holds, unseen for the bus's
// SessionTTL (the time the bus remembers a closed session's id).
func (h *Handler) sweep(now time.Time) {
	idle := int64(h.bus.Options().SessionTTL)
	h.streams.Range(func(_ string, s *stream) bool {
		switch {
		case s.expired(now):
		case s.implicit && s.frozen.Load() == nil && !h.bus.SessionExists(s.id):
		case s.frozen.Load() != nil && idle > 0 && now.UnixNano()-s.seen.Load() >= idle:
		default:
			return true
		}
		h.remove(s)
		return true
	})
}

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
			return c, errorf(http.StatusBadRequest, "invalid_ttl", "Stream-TTL %q is not a non-negative decimal integer without sign or leading zeros", strings.Join(ttl, ","))
		}
		c.ttl, _ = strconv.ParseInt(ttl[0], 10, 64)
	}
	if exp != "" {
		t, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			return c, errorf(http.StatusBadRequest, "invalid_expires_at", "Stream-Expires-At %q is not an RFC 3339 time", exp)
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
			return c, errorf(http.StatusBadRequest, "invalid_fork", "Stream-Fork-Sub-Offset %q is not a non-negative integer", strings.Join(sub, ","))
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
				return errorf(http.StatusConflict, "stream_deleted", "stream %q was deleted and is kept for its forks", name)
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
	h.meta(w, s, s.tail.Load())
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
		return errorf(http.StatusConflict, "stream_exists", "stream %q exists with another configuration", s.id)
	}
	h.meta(w, s, s.tail.Load())
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
		return nil, errorf(http.StatusNotFound, "source_not_found", "Stream-Forked-From %q is not a stream below %s", c.forkFrom, h.opts.Prefix)
	}
	src, ok := h.streams.Load(srcName)
	if ok && src.expired(time.Now()) {
		h.removeLocked(src)
		ok = false
	}
	if !ok {
		return nil, errorf(http.StatusNotFound, "source_not_found", "no stream %q to fork", srcName)
	}
	if src.deleted {
		return nil, errorf(http.StatusConflict, "source_deleted", "stream %q was deleted", srcName)
	}
	if c.ctype != "" && mediaType(c.ctype) != mediaType(src.ctype) {
		return nil, errorf(http.StatusConflict, "content_type_mismatch", "fork content type %q differs from the source's %q", c.ctype, src.ctype)
	}
	tail, err := h.tailOf(ctx, src)
	if err != nil {
		return nil, err
	}
	at := tail
	if c.forkOff != "" {
		p, err := ParseOffset(c.forkOff)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset: %v", err)
		}
		if p.ID == 0 {
			p.ID, p.Epoch = src.start(), h.epoch // names no event: the beginning
		}
		if p.Epoch != h.epoch {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %q is from another epoch", c.forkOff)
		}
		if p.ID > tail {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %q is beyond the source's tail", c.forkOff)
		}
		if p.ID < src.start() {
			return nil, errorf(http.StatusBadRequest, "invalid_offset", "Stream-Fork-Offset %q is before the source's start", c.forkOff)
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
			b, err := h.read(ctx, src, after, 0)
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
	s.tail.Store(s.forkAt)
	if prefix != nil {
		if _, err := h.publish(s, prefix); err != nil {
			h.dropNew(s)
			return nil, err
		}
	}
	return s, nil
}

// meta sets the headers every successful answer about s carries.
func (h *Handler) meta(w http.ResponseWriter, s *stream, next uint64) {
	hd := w.Header()
	hd.Set("Content-Type", s.ctype)
	hd.Set(HeaderNextOffset, h.offset(next))
	if s.closed.Load() {
		hd.Set(HeaderClosed, "true")
	}
}

// offset formats id of this bus's epoch.
func (h *Handler) offset(id uint64) string {
	return FormatOffset(eventbus.Position{ID: id, Epoch: h.epoch})
}

// body reads r's body, up to MaxBodyBytes (413 beyond).
func (h *Handler) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > h.opts.MaxBodyBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "body of %d bytes is over the %d-byte limit", r.ContentLength, h.opts.MaxBodyBytes)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "body over the %d-byte limit", h.opts.MaxBodyBytes)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_body", "reading the body: %v", err)
	}
	return b, nil
}

// split turns an append's body into items: for a JSON stream each element
// of a top-level array (one level flattened, PROTOCOL.md §9.1.2; an empty
// array is refused on POST, allowed on PUT) or the single value; else the
// bytes as one item.
func (h *Handler) split(s *stream, body []byte, create bool) ([][]byte, error) {
	if !s.json {
		return [][]byte{body}, nil
	}
	if !json.Valid(body) {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not valid JSON")
	}
	trim := strings.TrimLeft(string(body), " \t\r\n")
	if !strings.HasPrefix(trim, "[") {
		return [][]byte{body}, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(body, &arr); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not valid JSON: %v", err)
	}
	if len(arr) == 0 && !create {
		return nil, errorf(http.StatusBadRequest, "empty_array", "an empty JSON array appends nothing")
	}
	out := make([][]byte, len(arr))
	for i, m := range arr {
		out[i] = m
	}
	return out, nil
}

// mediaType is ct's media type, lower case, without parameters.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	}
	return strings.TrimSpace(mt)
}

// requestURL is r's absolute URL.
func requestURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

// ---- delete, head ----

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, name string) error {
	s, err := h.lookup(name)
	if err != nil {
		return err
	}
	h.remove(s)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) head(w http.ResponseWriter, r *http.Request, name string) error {
	s, err := h.lookup(name)
	if err != nil {
		return err
	}
	tail, err := h.tailOf(r.Context(), s)
	if err != nil {
		return err
	}
	h.meta(w, s, tail)
	hd := w.Header()
	if s.ttl > 0 {
		hd.Set(HeaderTTL, strconv.FormatInt(s.ttl, 10))
	}
	if !s.expiresAt.IsZero() {
		hd.Set(HeaderExpiresAt, s.expiresAt.UTC().Format(time.RFC3339Nano))
	}
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return nil
}

// ---- cursors (PROTOCOL.md §10.1) ----

var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

const cursorInterval = 20 // seconds

// cursor returns the Stream-Cursor for a live answer to a client that
// sent client: the current 20 s interval number since 2024-10-09, or,
// when the client's is not behind it, the client's plus 1–180 intervals
// of random jitter, so cursors never go back (as the reference server).
func cursor(client string) string {
	cur := int64(time.Since(cursorEpoch) / (cursorInterval * time.Second))
	if c, err := strconv.ParseInt(client, 10, 64); err == nil && c >= cur {
		jitter := 1 + rand.Int64N(3600)
		return strconv.FormatInt(c+max(1, (jitter+cursorInterval-1)/cursorInterval), 10)
	}
	return strconv.FormatInt(cur, 10)
}
