package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
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
	// the SSE route's JSON envelope (resume.AppendEnvelope). Default
	// DefaultEventType ("durable").
	EventType string
	// Logger receives one debug record per refused request and the
	// handler's errors; nil discards them.
	Logger *slog.Logger
	// Subscriptions turns on PROTOCOL.md's subscription APIs (§6–7) below
	// <Prefix>__ds/: webhook subscriptions (signed with an Ed25519 key made
	// at NewHandler, published at <Prefix>__ds/jwks.json) and pull-wake
	// subscriptions, over the appends made through this handler. Off by
	// default (the paths answer 501); with it on, Handler.Shutdown (or
	// Close) stops their deliveries.
	Subscriptions bool
}

// Handler serves bus sessions as Durable Streams (PROTOCOL.md of
// durable-streams/durable-streams): PUT creates (or forks), POST appends
// and closes, GET reads (catch-up, long-poll, SSE), HEAD reports and DELETE
// deletes the stream named by the path below HandlerOptions.Prefix, whose
// data is the bus session of that id (docs/durable-streams.md). It keeps
// what the bus does not: content type, TTL, closure, Stream-Seq, fork
// links, a closed stream's content; idempotent producers are the bus's.
// Safe for concurrent use; Close, Shutdown and Stats keep the SSE and
// WebSocket handlers' contract. Create one with NewHandler.
type Handler struct {
	bus   *eventbus.Bus
	epoch string
	opts  HandlerOptions
	chunk int
	log   *slog.Logger

	streams *xsync.MapOf[string, *stream]
	// forgotten holds the names of streams this handler deleted or
	// expired while the bus remembers their closed ids: they read as
	// deleted (404), a session closed by another route as closed (410).
	forgotten *xsync.MapOf[string, struct{}]
	requests  *serve.Registry[context.CancelFunc] // requests being served, for Close and Shutdown
	cnt       counters                            // Stats
	mu        sync.Mutex                          // creation, deletion, fork reference counts
	gen       atomic.Uint64
	swept     atomic.Int64 // Unix ns of the last sweep
	subs      *subsState   // nil without HandlerOptions.Subscriptions

	mediaMu sync.Mutex          // guards media
	media   map[string]struct{} // canonical media types had interned (see mayIntern)
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
	o.ChunkBytes = cmp.Or(o.ChunkBytes, DefaultChunkBytes)
	o.MaxBodyBytes = cmp.Or(o.MaxBodyBytes, DefaultMaxBodyBytes)
	o.SSEDuration = cmp.Or(o.SSEDuration, DefaultSSEDuration)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, DefaultWriteTimeout)
	o.EventType = cmp.Or(o.EventType, DefaultEventType)
	if frame.Reserved(o.EventType) || strings.ContainsAny(o.EventType, "\r\n") {
		return nil, fmt.Errorf("durable: EventType %q is reserved or has a line break", o.EventType)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{bus: bus, epoch: bus.Epoch(), opts: o, chunk: o.ChunkBytes, log: o.Logger,
		streams: xsync.NewMapOf[string, *stream](), forgotten: xsync.NewMapOf[string, struct{}](),
		requests: serve.NewRegistry(func(cancel context.CancelFunc) { cancel() })}
	if o.Subscriptions {
		h.subs = newSubsState()
	}
	return h, nil
}

// Prefix returns the path the handler serves below (HandlerOptions.Prefix,
// Pattern by default). Safe for concurrent use.
func (h *Handler) Prefix() string { return h.opts.Prefix }

// ServeHTTP serves one request on a stream URL; see docs/durable-streams.md
// for each answer. Besides the protocol's, it answers OPTIONS (CORS
// preflight) with 204 and any other method with 405. Errors are
// resume.StatusError answers {"code","message"} in the codes every route
// shares (session_not_found, invalid_session_id, session_closed — 409 with
// Stream-Closed on an append, else 410 —, subscriber_limit_exceeded with Retry-After,
// unavailable, …) and the stream's own (invalid_offset, stream_exists, …);
// an offset of lost history is 410 ring_evicted or epoch_reset, naming it.
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
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		// A request with a body has its write deadline armed when the
		// body is in (readBody), or when it is refused before (fail):
		// armed now, a slow upload spent it, and over HTTP/2 a passed
		// deadline resets the stream mid-upload.
		h.deadline(w)
	}
	r, id, cancel, ok := h.admit(w, r)
	if !ok {
		return
	}
	defer h.requests.Remove(id, nil)
	defer cancel()
	h.maybeSweep()
	name, ok := strings.CutPrefix(r.URL.Path, h.opts.Prefix)
	if !ok {
		h.fail(w, r, name, errorf(http.StatusNotFound, resume.CodeNotFound, "no stream at %s (streams are below %s)", quote(r.URL.Path), h.opts.Prefix))
		return
	}
	if name == "__ds" || strings.HasPrefix(name, "__ds/") {
		if h.subs != nil {
			h.serveDS(w, r, strings.TrimPrefix(name, "__ds/"))
			return
		}
		h.fail(w, r, name, errorf(http.StatusNotImplemented, resume.CodeNotImplemented, "%s__ds is reserved for Durable Streams control APIs (subscriptions), which this handler does not offer (HandlerOptions.Subscriptions)", h.opts.Prefix))
		return
	}
	if err := frame.CheckName("session id", name); err != nil {
		// The text the SSE route gives for the same id (an empty one: the
		// path names no stream below the prefix).
		h.fail(w, r, name, errorf(http.StatusBadRequest, resume.CodeInvalidSessionID, "invalid argument: %v", err))
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
		err = withHeader(errorf(http.StatusMethodNotAllowed, resume.CodeMethodNotAllowed, "method %s not allowed on a stream", quote(r.Method)),
			"Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
	}
	if err != nil {
		h.fail(w, r, name, err)
		return
	}
	h.cnt.started.Add(1)
}

const (
	exposed = "Stream-Next-Offset, Stream-Up-To-Date, Stream-Cursor, Stream-Closed, Stream-TTL, " +
		"Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, " +
		"Producer-Received-Seq, ETag, Location, Content-Type"
	allowed = "Content-Type, If-None-Match, Stream-TTL, Stream-Expires-At, Stream-Closed, Stream-Seq, " +
		"Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset, Producer-Id, Producer-Epoch, Producer-Seq, " +
		"Authorization"
)

// deadline bounds the next write by WriteTimeout; undeadline lifts it
// before a wait. A deadline left in place while a long-poll or an SSE
// answer waits would end it over HTTP/2, which resets a stream when its
// deadline passes even with nothing being written.
func (h *Handler) deadline(w http.ResponseWriter) {
	if h.opts.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	}
}

func (h *Handler) undeadline(w http.ResponseWriter) {
	if h.opts.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
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
	h.meta(w, s, h.tail(s))
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
