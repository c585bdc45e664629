package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// Handler defaults and bounds.
const (
	// Pattern is the Go 1.22+ http.ServeMux pattern the handler is made for:
	// mux.Handle(sse.Pattern, h). The {id} wildcard is read with PathValue.
	Pattern = "GET /session/{id}/events"
	// DefaultRetry is the reconnection delay the handler announces with
	// retry: as its first write.
	DefaultRetry = 3 * time.Second
	// DefaultHeartbeat is how long a stream may stay silent before the
	// handler writes a ": heartbeat" comment.
	DefaultHeartbeat = 15 * time.Second
	// DefaultWriteTimeout bounds each write+flush to the client.
	DefaultWriteTimeout = 10 * time.Second
)

// HandlerOptions configure a [Handler]. The zero value is valid: PathValue
// session ids, no authorization, retry 3 s, heartbeat 15 s, write timeout
// 10 s, epoch-qualified ids.
type HandlerOptions struct {
	// SessionID extracts the session id from a request; nil means
	// r.PathValue("id"), for a ServeMux pattern such as [Pattern]. See
	// [resume.SessionIDFunc].
	SessionID resume.SessionIDFunc
	// Authorize, when set, admits or refuses a validated request before
	// anything is subscribed: 403, or the [*resume.StatusError] its error
	// is or wraps. See [resume.AuthorizeFunc].
	Authorize resume.AuthorizeFunc
	// Configure, when set, may adjust the subscribe options derived from
	// the request just before [eventbus.Bus.Subscribe]. See
	// [resume.ConfigureFunc].
	Configure resume.ConfigureFunc
	// OnSubscribe, when set, is called with each stream's subscription
	// before its first frame is written, for [eventbus.Bus.SendTo]. See
	// [resume.OnSubscribeFunc].
	OnSubscribe resume.OnSubscribeFunc
	// Retry is the reconnection delay sent as "retry: <ms>" first on every
	// stream. Zero means DefaultRetry (3 s); negative sends no retry: line.
	Retry time.Duration
	// Heartbeat is the silence after which a ": heartbeat" comment is
	// written, by the same goroutine that writes frames. Zero means
	// DefaultHeartbeat (15 s); negative disables heartbeats.
	Heartbeat time.Duration
	// WriteTimeout is the deadline set (http.ResponseController
	// .SetWriteDeadline) before each write+flush and cleared right after
	// it, so a peer that stopped reading cannot pin the stream's goroutine
	// (the stream ends when it passes) while a quiet stream is never cut,
	// over HTTP/1.1 or HTTP/2 alike. Zero means DefaultWriteTimeout (10 s);
	// negative sets none. It overrides http.Server.WriteTimeout for the
	// stream.
	WriteTimeout time.Duration
	// OverflowPolicy is the overflow policy of each stream's subscription
	// (Configure may still change it). Empty means the bus's
	// Options.OverflowPolicy when that is set, else drop_subscriber: a
	// stream's client resumes by itself with its cursor and loses nothing,
	// where a drop would leave it a gap to repair. docs/operations.md
	// states the rule.
	OverflowPolicy eventbus.OverflowPolicy
	// Query says what to do with query parameters the endpoint does not
	// read. The zero value ignores them unless one looks like a misspelling
	// of a known name (?lastEventID=), which is a 400
	// unknown_query_parameter; Query.Strict refuses every unknown one but
	// those in Query.Allow. See [resume.QueryRules].
	Query resume.QueryRules
	// Hijack serves each HTTP/1.x stream, once subscribed, on its
	// connection itself (http.Hijacker) rather than through net/http: an
	// idle stream then costs about 14 KiB of the server's memory instead
	// of 28 KiB (net/http's buffers and serving goroutine are released;
	// docs/operations.md, "Memory per idle SSE stream"). The answer has Connection:
	// close and no length (its body ends with the connection). Off by
	// default, because a taken-over stream leaves net/http's view:
	// http.Server.Shutdown does not wait for it and http.Server.Close does
	// not close it (end streams with [Handler.Close] or [Handler.Shutdown],
	// for example from http.Server.RegisterOnShutdown), and middleware
	// that wraps the ResponseWriter no longer sees the stream's writes.
	// HTTP/2 streams, writers that cannot be hijacked (a wrapper without
	// Unwrap), and answers with a Content-Encoding stay on net/http.
	Hijack bool
	// PlainIDs writes ids as plain decimal sequence numbers ("id: 42"), the
	// wire form of AgentPool and qwen-code, for clients that parse ids as
	// numbers. False (the default) writes them epoch-qualified,
	// "<epoch>-<seq>", so that a browser, which cannot send X-Event-Epoch,
	// hands the epoch back in Last-Event-ID and a server restart is an
	// epoch_reset; with plain ids a browser's Last-Event-ID after a restart
	// silently resumes in the new history. Both forms are accepted as a
	// cursor either way.
	PlainIDs bool
	// MaxSessions caps the set of a many-sessions stream (ManyPattern):
	// zero means resume.DefaultMaxSessions (100); at most
	// resume.MaxMaxSessions (1,000). Over it: 400 too_many_sessions.
	MaxSessions int
	// CrossOrigin guards POST {events}/{conn} against pages of other
	// origins (403 forbidden_origin); nil is
	// http.NewCrossOriginProtection(): same origin only.
	CrossOrigin *http.CrossOriginProtection
	// Logger receives a debug record per stream end and per failed write
	// (a client that went away), and a warning per write that hit
	// WriteTimeout. Nil: no logging.
	Logger *slog.Logger
}

// Handler serves one session's events over Server-Sent Events: the
// endpoint GET /session/{id}/events (docs/protocol.md), modelled on qwen-code's
// SSE route. See the package documentation for the wire format, the query
// parameters and every status code.
//
// Each stream is written by the request's own goroutine (frames, heartbeats
// and the retry line alike: one writer); the handler starts no goroutines.
// A Handler is safe for concurrent use. After [Handler.Close] every open
// stream ends and new requests get a retry: line and an empty stream.
type Handler struct {
	bus     *eventbus.Bus
	o       HandlerOptions
	hooks   serve.Hooks
	retry   time.Duration
	hb      time.Duration
	wt      time.Duration
	encOpts EncodeOptions

	streams     *serve.Registry[*streamState]
	conns       *xsync.MapOf[string, *resume.Many] // open many-sessions streams by connection id
	cross       *http.CrossOriginProtection
	maxSessions int
	cache       frameCache   // one encoding of each event, shared by every stream
	active      atomic.Int32 // open streams; with one, nothing is shared and the cache is skipped

	started, rejected, writeErrors atomic.Uint64
	// frames and heartbeats of streams that have ended; a live stream
	// counts in its own streamState, so streams never contend on one
	// counter.
	frames, heartbeats atomic.Uint64
}

// streamState is one open stream: how to end it and its own counters.
type streamState struct {
	// cancel ends the context of a stream that has one of its own (one
	// that may take its connection over); nil for a stream that runs on
	// its request's context, which end closes the subscription of.
	cancel             context.CancelFunc
	sub                atomic.Pointer[eventbus.Subscription]
	ended              atomic.Bool
	frames, heartbeats atomic.Uint64
}

// end ends the stream (Handler.Close): its parked read returns at once.
// Safe for concurrent use; a stream not yet subscribed learns it from
// subscribed.
func (st *streamState) end() {
	if st.cancel != nil {
		st.cancel()
		return
	}
	st.ended.Store(true)
	if sub := st.sub.Load(); sub != nil {
		sub.Close()
	}
}

// subscribed records the stream's subscription; false when end came
// first (the subscription is then closed).
func (st *streamState) subscribed(sub *eventbus.Subscription) bool {
	st.sub.Store(sub)
	if st.ended.Load() {
		sub.Close()
		return false
	}
	return true
}

// NewHandler returns a Handler serving bus. It fails when bus is nil, and
// when o.OverflowPolicy is neither empty nor one of the bus's policies (an
// error naming the value that matches eventbus.ErrInvalid). Options are
// read once; see [HandlerOptions] for the defaults.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	hooks := serve.Hooks{SessionID: o.SessionID, Authorize: o.Authorize, Configure: o.Configure, Query: o.Query,
		OverflowPolicy: o.OverflowPolicy}
	if err := hooks.Check("sse: NewHandler", bus); err != nil {
		return nil, err
	}
	h := &Handler{bus: bus, o: o, hooks: hooks, streams: serve.NewRegistry((*streamState).end)}
	h.conns, h.cross, h.maxSessions = newConns(), o.CrossOrigin, o.MaxSessions
	if h.cross == nil {
		h.cross = http.NewCrossOriginProtection()
	}
	switch {
	case h.maxSessions == 0:
		h.maxSessions = resume.DefaultMaxSessions
	case h.maxSessions < 0 || h.maxSessions > resume.MaxMaxSessions:
		return nil, fmt.Errorf("sse: NewHandler: MaxSessions %d out of range [1, %d]: %w", o.MaxSessions, resume.MaxMaxSessions, eventbus.ErrInvalid)
	}
	h.retry = serve.DurationOr(o.Retry, DefaultRetry)
	h.hb = serve.DurationOr(o.Heartbeat, DefaultHeartbeat)
	h.wt = serve.DurationOr(o.WriteTimeout, DefaultWriteTimeout)
	if !o.PlainIDs {
		h.encOpts.Epoch = bus.Epoch()
	}
	return h, nil
}

// Stats are a Handler's counters; see [Handler.Stats]. Active is current,
// the others are totals since the handler was made. The JSON names are
// lowerCamel, as those of observe.Stats (the example server's GET /info
// carries both).
type Stats struct {
	Active      int    `json:"active"`      // streams open now
	Started     uint64 `json:"started"`     // streams that got a 200 answer
	Rejected    uint64 `json:"rejected"`    // requests answered with an error status
	Frames      uint64 `json:"frames"`      // frames written (events and synthetic frames; not the retry line, stream_start or heartbeats)
	Heartbeats  uint64 `json:"heartbeats"`  // heartbeat comments written
	WriteErrors uint64 `json:"writeErrors"` // streams ended by a failed or timed-out write
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	var st Stats
	st.Active = h.streams.Each(func(s *streamState) {
		st.Frames += s.frames.Load()
		st.Heartbeats += s.heartbeats.Load()
	})
	st.Frames += h.frames.Load()
	st.Heartbeats += h.heartbeats.Load()
	st.Started, st.Rejected, st.WriteErrors = h.started.Load(), h.rejected.Load(), h.writeErrors.Load()
	return st
}

// Close makes the handler refuse new streams — answered 200 with only a
// retry: line, never 503, so browsers come back (see the package
// documentation) — and ends every open stream at once: each unsubscribes and returns from
// ServeHTTP without a further frame, so browsers reconnect after their retry
// delay. It does not wait; see [Handler.Shutdown]. Idempotent; always nil.
// Suitable for http.Server.RegisterOnShutdown.
func (h *Handler) Close() error {
	h.streams.Close()
	return nil
}

// Shutdown is [Handler.Close] followed by waiting until every stream has
// returned from ServeHTTP, or until ctx ends (then it returns ctx's error).
// Each stream ends within the write timeout of the Close.
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.streams.Shutdown(ctx)
}

// register adds a stream; false when the handler is closed.
func (h *Handler) register(st *streamState) (uint64, bool) {
	h.active.Add(1)
	id, ok := h.streams.Add(st)
	if !ok {
		h.active.Add(-1)
	}
	return id, ok
}

func (h *Handler) unregister(id uint64) {
	h.streams.Remove(id, func(st *streamState) {
		h.frames.Add(st.frames.Load())
		h.heartbeats.Add(st.heartbeats.Load())
		h.active.Add(-1)
	})
}

// reject answers a refused request: err as the *resume.StatusError it is,
// or as resume.StatusFor maps a bus error for session.
func (h *Handler) reject(w http.ResponseWriter, err error, session string) {
	h.rejected.Add(1)
	resume.WriteError(w, err, session)
}

// ServeHTTP validates the request, subscribes and streams until the client
// goes, the subscription ends (session_closed, client_evicted, bus closed),
// a write fails or times out, or the handler is closed. Every error answer
// is given before the stream starts and without a subscriber registered.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The stream is set up by open, in a frame of its own: the goroutine
	// that serves it then waits, for the stream's life, with only the
	// frames below on its stack (under 4 KiB with net/http's), so that the
	// garbage collector shrinks its stack to 8 KiB (it halves a stack
	// whose use is under a quarter of it): 8 KiB less per idle
	// connection than with the setup's locals in this frame.
	if r.Method == http.MethodPost && r.PathValue("conn") != "" {
		h.serveChange(w, r)
		return
	}
	if h.o.SessionID == nil && r.PathValue("id") == "" && h.isMany(r) {
		h.serveMany(w, r)
		return
	}
	s := h.open(w, r)
	if s == nil {
		return
	}
	if h.takeOver(w, r, s) { // HTTP/1.x: served on the connection itself (takeover.go)
		return
	}
	defer s.close(h)
	s.ended(h, r.RemoteAddr, h.stream(s.ctx, w, s.sub, s.session, s.enc, s.st, s.live, s.start))
}

// ended logs why a stream ended.
//
//go:noinline
func (s *opened) ended(h *Handler, remote string, reason error) {
	if h.o.Logger != nil {
		h.o.Logger.LogAttrs(s.ctx, slog.LevelDebug, "sse: stream ended",
			slog.String("session", s.session), slog.String("remote", remote), slog.Any("reason", reason))
	}
}

// opened is a stream that open set up.
type opened struct {
	ctx     context.Context
	cancel  context.CancelFunc
	stop    func() bool // ends the link from the request's context to cancel
	id      uint64
	st      *streamState
	sub     *eventbus.Subscription
	session string
	enc     EncodeOptions
	live    bool
	start   uint64
}

// close undoes open: the subscription, the registration, the context.
func (s *opened) close(h *Handler) {
	s.sub.Close()
	h.unregister(s.id)
	s.stop()
	s.cancel()
}

// open admits r, registers the stream and subscribes; nil when it answered
// the request instead (an error, a handler or bus shutting down, a client
// already gone).
//
//go:noinline
func (h *Handler) open(w http.ResponseWriter, r *http.Request) *opened {
	adm, serr := serve.Admit(w, r, h.bus, h.hooks, nil)
	if serr != nil {
		h.reject(w, serr, adm.Session)
		return nil
	}
	s := &opened{session: adm.Session, enc: h.encOpts}
	opts := adm.Options
	s.enc.NoEventField = adm.Message
	s.st = &streamState{}
	if h.mayTakeOver(r) {
		// The stream's context ends with the request's unless the stream
		// takes its connection over (takeover.go): net/http ends the
		// request when ServeHTTP returns, and the stream goes on.
		s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(r.Context()))
		s.stop = context.AfterFunc(r.Context(), s.cancel)
		s.st.cancel = s.cancel
	} else {
		// The request's own context, and Handler.Close closes the
		// subscription: no context, cancel func or AfterFunc of the
		// stream's own (about 0.5 KiB per idle stream).
		s.ctx, s.cancel, s.stop = r.Context(), func() {}, func() bool { return false }
	}
	id, ok := h.register(s.st)
	if !ok {
		s.stop()
		s.cancel()
		h.goAway(w)
		return nil
	}
	s.id = id
	// A live-only stream starts at the newest id before it subscribes:
	// every event after it is either delivered live or, should the client
	// be cut before its first one, replayed by the resume from it.
	s.live = opts.NoReplay && opts.Cursor == nil
	if s.live {
		s.start = h.bus.LastEventID()
	}
	sub, err := h.bus.Subscribe(s.ctx, s.session, opts)
	if err != nil {
		h.unregister(id)
		s.stop()
		defer s.cancel()
		switch {
		case r.Context().Err() != nil: // the client is gone: nobody to answer
		case s.ctx.Err() != nil, s.st.ended.Load(), errors.Is(err, eventbus.ErrClosed):
			// The handler (or the bus) closed while the stream was being
			// opened: answered as a request after the close, not left to
			// net/http's empty 200, which is no event stream at all.
			h.goAway(w)
		default:
			h.reject(w, err, s.session)
		}
		return nil
	}
	if !s.st.subscribed(sub) {
		// The handler closed while the stream was being opened.
		h.unregister(id)
		s.stop()
		s.cancel()
		h.goAway(w)
		return nil
	}
	s.sub = sub
	h.started.Add(1)
	if h.o.OnSubscribe != nil {
		h.o.OnSubscribe(r, sub)
	}
	return s
}

// goAway answers a request that arrives while the handler or the bus is
// shutting down. A 503 would make a browser's EventSource give up for good
// (WHATWG: any non-200 answer fails the connection), so it answers 200
// text/event-stream with a retry: line and ends the response at once: an
// EventSource reconnects after that delay, and so does [Stream]. The delay
// is drawn from [retry, 2×retry] so that the clients of a restarting server
// do not all come back in the same instant. Retry-After carries the same
// hint for other clients.
func (h *Handler) goAway(w http.ResponseWriter) {
	h.rejected.Add(1)
	base := h.retry
	if base <= 0 {
		base = DefaultRetry
	}
	d := base + rand.N(base+1)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	hd.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	enc := NewEncoder(w, EncodeOptions{})
	_ = enc.retry(d)
	_ = enc.comment("unavailable: the server is shutting down; reconnect")
	_ = http.NewResponseController(w).Flush()
}

// stream writes the answer headers, the retry line, the stream_start frame
// of a live-only stream (see [resume.TypeStreamStart]) and then every frame of sub,
// with heartbeats in the gaps, until something ends it; it returns why.
func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, sub *eventbus.Subscription, sessionID string, enc EncodeOptions, st *streamState, live bool, start uint64) error {
	sw, err := h.begin(ctx, w, sessionID, enc, live, start)
	if err != nil {
		return err
	}
	defer sw.rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort: leave no deadline on a kept-alive conn
	return h.loop(w, sw, sub, enc, st)
}

// begin writes the answer's headers, the retry line and the stream_start
// frame of a live-only stream, and returns the stream's writer.
//
//go:noinline
func (h *Handler) begin(ctx context.Context, w http.ResponseWriter, sessionID string, enc EncodeOptions, live bool, start uint64) (*streamWriter, error) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("X-Accel-Buffering", "no")
	hd.Del("Content-Length")
	w.WriteHeader(http.StatusOK)

	sw := &streamWriter{h: h, ctx: ctx, rc: http.NewResponseController(w), enc: NewEncoder(w, enc)}
	var head []byte
	if h.retry > 0 {
		head = appendRetry(head, h.retry)
	}
	if live {
		head = appendStart(head, sessionID, start, h.bus.Epoch(), enc.Epoch)
	}
	sw.begin()
	return sw, sw.end(writeAll(w, head)) // also sends the headers
}

// loop writes every frame of sub, with heartbeats in the gaps, until
// something ends the stream; it returns why.
func (h *Handler) loop(w http.ResponseWriter, sw *streamWriter, sub *eventbus.Subscription, enc EncodeOptions, st *streamState) error {
	// Heartbeats: NextBefore waits until hb after the last write and then
	// returns eventbus.ErrTimeout; no deadline context, no timer of its
	// own (the bus keeps one queue of deadlines for every parked stream).
	// The request context ends the subscription (it was subscribed with
	// it), and NextBefore then returns its error.
	lastWrite := time.Now()
	for {
		var deadline time.Time
		if h.hb > 0 {
			deadline = lastWrite.Add(h.hb)
		}
		ev, err := sub.NextBefore(deadline)
		if err != nil {
			if errors.Is(err, eventbus.ErrTimeout) {
				sw.begin()
				if err := sw.end(sw.enc.comment("heartbeat")); err != nil {
					return err
				}
				st.heartbeats.Add(1)
				lastWrite = time.Now()
				continue
			}
			return err
		}
		// A batch: this frame and whatever else is ready, written under
		// one deadline and sent with one flush (centrifuge's writer does
		// the same), each real event encoded once for all streams.
		sw.begin()
		n, err := sw.batch(w, sub, ev, enc)
		if err == nil {
			err = sw.end(nil)
		} else {
			err = sw.end(err)
		}
		st.frames.Add(uint64(n))
		if err != nil {
			return err
		}
		lastWrite = time.Now()
	}
}

// appendStart appends the resume.TypeStreamStart frame for a stream of session
// that starts after seq, with the id in the form idEpoch selects.
func appendStart(dst []byte, session string, seq uint64, busEpoch, idEpoch string) []byte {
	cursor := resume.FormatID(seq, idEpoch)
	dst = append(dst, "id: "...)
	dst = append(dst, cursor...)
	dst = append(dst, '\n')
	return AppendEvent(dst, resume.StartEvent(session, cursor, busEpoch), EncodeOptions{})
}

// writeAll writes b to w unless it is empty.
func writeAll(w io.Writer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := w.Write(b)
	return err
}

// streamWriter brackets each write of a stream with its deadline and flush.
type streamWriter struct {
	h       *Handler
	ctx     context.Context
	rc      *http.ResponseController
	enc     *Encoder
	scratch []byte // frames not taken from the cache are built here
	noFlush bool   // Flush is not supported
}

// begin sets the write deadline for the next write+flush.
func (sw *streamWriter) begin() {
	if sw.h.wt > 0 {
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.h.wt)) // ErrNotSupported: nothing to bound
	}
}

// end flushes after a write that returned err, counting a failure, and
// clears the write deadline: a deadline must not outlive the write it
// guards. Over HTTP/2 a deadline left in place resets the stream when it
// passes, even on a stream that is quietly waiting for its next event.
func (sw *streamWriter) end(err error) error {
	if err == nil {
		if err = sw.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			// A wrapper without Unwrap hides the Flusher: frames then sit
			// in the buffer until it fills. Say so once.
			if !sw.noFlush && sw.h.o.Logger != nil {
				sw.h.o.Logger.LogAttrs(sw.ctx, slog.LevelWarn, "sse: response writer cannot flush; frames will be delayed")
			}
			sw.noFlush, err = true, nil
		}
		if err == nil && sw.h.wt > 0 {
			_ = sw.rc.SetWriteDeadline(time.Time{}) // ErrNotSupported: nothing was set
		}
	}
	if err != nil {
		sw.h.writeErrors.Add(1)
		if sw.h.o.Logger != nil {
			// A peer that went away is routine for SSE; one that stopped
			// reading until the deadline is worth a warning.
			level := slog.LevelDebug
			if errors.Is(err, os.ErrDeadlineExceeded) {
				level = slog.LevelWarn
			}
			sw.h.o.Logger.LogAttrs(sw.ctx, level, "sse: write failed", slog.Any("error", err))
		}
	}
	return err
}
