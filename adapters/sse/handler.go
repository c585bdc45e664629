package sse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// Handler defaults and bounds.
const (
	// Pattern is the Go 1.22+ http.ServeMux pattern the handler is made for:
	// mux.Handle(sse.Pattern, h). The {id} wildcard is read with PathValue.
	Pattern = "GET /session/{id}/events"
	// HeaderEpoch carries the bus epoch: the handler sends it on every
	// answer, and a client sends it back so that a cursor from another bus
	// incarnation is detected (an epoch_reset frame, not an error).
	HeaderEpoch = "X-Event-Epoch"
	// DefaultRetry is the reconnection delay the handler announces with
	// retry: as its first write.
	DefaultRetry = 3 * time.Second
	// DefaultHeartbeat is how long a stream may stay silent before the
	// handler writes a ": heartbeat" comment.
	DefaultHeartbeat = 15 * time.Second
	// DefaultWriteTimeout bounds each write+flush to the client.
	DefaultWriteTimeout = 10 * time.Second
	// MinMaxQueued and MaxMaxQueued bound the ?maxQueued= query parameter,
	// qwen-code's range.
	MinMaxQueued, MaxMaxQueued = 16, 2048
	// retryAfterBusy is the Retry-After of 429 and 503 answers.
	retryAfterBusy = 5 * time.Second
)

// HandlerOptions configure a [Handler]. The zero value is valid: PathValue
// session ids, no authorization, retry 3 s, heartbeat 15 s, write timeout
// 10 s, plain decimal ids.
type HandlerOptions struct {
	// SessionID extracts the session id from a request. Nil means
	// r.PathValue("id"), which works when the handler is mounted on a
	// ServeMux pattern with an {id} wildcard such as [Pattern]; set it to
	// mount under any other router (chi.URLParam, a path prefix, …).
	SessionID func(r *http.Request) string
	// Authorize, when set, is called after the request has been validated
	// and before anything is subscribed; a non-nil error answers 403
	// forbidden with the error's text as message, or, when the error is (or
	// wraps) a [*StatusError], that status, code and message. It runs on the
	// request's goroutine and may block (it holds no lock).
	Authorize func(r *http.Request, sessionID string, sc scope.Kind) error
	// Configure, when set, may adjust the subscribe options derived from the
	// request (overflow policy, byte limit, slow-client warnings, Name)
	// just before [eventbus.Bus.Subscribe]. The bus validates the result: an
	// eventbus.ErrInvalid answers 400 invalid_request.
	Configure func(r *http.Request, o *eventbus.SubscribeOptions)
	// Retry is the reconnection delay sent as "retry: <ms>" first on every
	// stream. Zero means DefaultRetry (3 s); negative sends no retry: line.
	Retry time.Duration
	// Heartbeat is the silence after which a ": heartbeat" comment is
	// written, by the same goroutine that writes frames. Zero means
	// DefaultHeartbeat (15 s); negative disables heartbeats.
	Heartbeat time.Duration
	// WriteTimeout is the deadline set (http.ResponseController
	// .SetWriteDeadline) before each write+flush, so a peer that stopped
	// reading cannot pin the stream's goroutine; the stream ends when it
	// passes. Zero means DefaultWriteTimeout (10 s); negative sets none.
	// It overrides http.Server.WriteTimeout for the stream.
	WriteTimeout time.Duration
	// EpochIDs writes ids as "<epoch>-<seq>" so that a browser, which cannot
	// send X-Event-Epoch, hands the epoch back in Last-Event-ID and a server
	// restart is detected exactly. Both forms are accepted either way.
	EpochIDs bool
	// Logger receives a debug record per stream end and per failed write
	// (a client that went away), and a warning per write that hit
	// WriteTimeout. Nil: no logging.
	Logger *slog.Logger
}

// Handler serves one session's events over Server-Sent Events: the
// endpoint GET /session/{id}/events of DESIGN.md §7, modelled on qwen-code's
// SSE route. See the package documentation for the wire format, the query
// parameters and every status code.
//
// Each stream is written by the request's own goroutine (frames, heartbeats
// and the retry line alike: one writer); the handler starts no goroutines.
// A Handler is safe for concurrent use. After [Handler.Close] it answers
// 503 unavailable and every open stream ends.
type Handler struct {
	bus     *eventbus.Bus
	o       HandlerOptions
	retry   time.Duration
	hb      time.Duration
	wt      time.Duration
	encOpts EncodeOptions

	mu      sync.Mutex
	closed  bool
	nextID  uint64
	streams map[uint64]context.CancelFunc
	idle    chan struct{} // closed when closed and no stream is left

	started, rejected, frames, heartbeats, writeErrors atomic.Uint64
}

// NewHandler returns a Handler serving bus. It fails when bus is nil.
// Options are read once; see [HandlerOptions] for the defaults.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil {
		return nil, errors.New("sse: NewHandler: nil bus")
	}
	h := &Handler{bus: bus, o: o, streams: make(map[uint64]context.CancelFunc), idle: make(chan struct{})}
	h.retry = durationOr(o.Retry, DefaultRetry)
	h.hb = durationOr(o.Heartbeat, DefaultHeartbeat)
	h.wt = durationOr(o.WriteTimeout, DefaultWriteTimeout)
	if o.EpochIDs {
		h.encOpts.Epoch = bus.Epoch()
	}
	return h, nil
}

func durationOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Stats are a Handler's counters; see [Handler.Stats].
type Stats struct {
	Active      int    // streams open now
	Started     uint64 // streams that got a 200 answer
	Rejected    uint64 // requests answered with an error status
	Frames      uint64 // frames written (events and synthetic frames)
	Heartbeats  uint64 // heartbeat comments written
	WriteErrors uint64 // streams ended by a failed or timed-out write
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	active := len(h.streams)
	h.mu.Unlock()
	return Stats{Active: active, Started: h.started.Load(), Rejected: h.rejected.Load(),
		Frames: h.frames.Load(), Heartbeats: h.heartbeats.Load(), WriteErrors: h.writeErrors.Load()}
}

// Close makes the handler refuse new streams (503 unavailable, Retry-After
// 5) and ends every open stream at once: each unsubscribes and returns from
// ServeHTTP without a further frame, so browsers reconnect after their retry
// delay. It does not wait; see [Handler.Shutdown]. Idempotent; always nil.
// Suitable for http.Server.RegisterOnShutdown.
func (h *Handler) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	for _, cancel := range h.streams {
		cancel()
	}
	if len(h.streams) == 0 {
		close(h.idle)
	}
	return nil
}

// Shutdown is [Handler.Close] followed by waiting until every stream has
// returned from ServeHTTP, or until ctx ends (then it returns ctx's error).
// Each stream ends within the write timeout of the Close.
func (h *Handler) Shutdown(ctx context.Context) error {
	_ = h.Close()
	select {
	case <-h.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// register adds a stream; false when the handler is closed.
func (h *Handler) register(cancel context.CancelFunc) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, false
	}
	h.nextID++
	h.streams[h.nextID] = cancel
	return h.nextID, true
}

func (h *Handler) unregister(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, id)
	if h.closed && len(h.streams) == 0 {
		select {
		case <-h.idle:
		default:
			close(h.idle)
		}
	}
}

func (h *Handler) reject(w http.ResponseWriter, e *StatusError) {
	h.rejected.Add(1)
	e.write(w)
}

// ServeHTTP validates the request, subscribes and streams until the client
// goes, the subscription ends (session_closed, client_evicted, bus closed),
// a write fails or times out, or the handler is closed. Every error answer
// is given before the stream starts and without a subscriber registered.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderEpoch, h.bus.Epoch())
	if r.Method != http.MethodGet {
		h.reject(w, &StatusError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed (want GET)", r.Method)})
		return
	}
	sessionID, opts, serr := h.parseRequest(r)
	if serr != nil {
		h.reject(w, serr)
		return
	}
	enc := h.encOpts
	switch s := r.URL.Query().Get("events"); s {
	case "", "typed":
	case "message":
		enc.NoEventField = true
	default:
		h.reject(w, &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidEvents,
			Message: fmt.Sprintf("invalid events %s (want typed or message)", quoteCut(s))})
		return
	}
	if h.o.Authorize != nil {
		if err := h.o.Authorize(r, sessionID, opts.Scope); err != nil {
			var se *StatusError
			if !errors.As(err, &se) {
				se = &StatusError{Status: http.StatusForbidden, Code: CodeForbidden, Message: err.Error()}
			}
			h.reject(w, se)
			return
		}
	}
	if h.o.Configure != nil {
		h.o.Configure(r, &opts)
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, ok := h.register(cancel)
	if !ok {
		h.reject(w, &StatusError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "sse: handler closed", RetryAfter: retryAfterBusy})
		return
	}
	defer h.unregister(id)

	sub, err := h.bus.Subscribe(ctx, sessionID, opts)
	if err != nil {
		if ctx.Err() != nil {
			return // the client is gone (or the handler closed): nobody to answer
		}
		h.reject(w, statusFor(err))
		return
	}
	defer sub.Close()
	h.started.Add(1)
	reason := h.stream(ctx, w, sub, enc)
	if h.o.Logger != nil {
		h.o.Logger.LogAttrs(ctx, slog.LevelDebug, "sse: stream ended",
			slog.String("session", sessionID), slog.String("remote", r.RemoteAddr), slog.Any("reason", reason))
	}
}

// stream writes the answer headers, the retry line and then every frame of
// sub, with heartbeats in the gaps, until something ends it; it returns why.
func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, sub *eventbus.Subscription, enc EncodeOptions) error {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("X-Accel-Buffering", "no")
	hd.Del("Content-Length")
	w.WriteHeader(http.StatusOK)

	sw := &streamWriter{h: h, ctx: ctx, rc: http.NewResponseController(w), enc: NewEncoder(w, enc)}
	defer sw.rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort: leave no deadline on a kept-alive conn
	if h.retry > 0 {
		sw.begin()
		if err := sw.end(sw.enc.Retry(h.retry)); err != nil {
			return err
		}
	} else if err := sw.end(nil); err != nil { // send the headers now
		return err
	}

	// Heartbeats: Next waits under a deadline context that fires hb after
	// the last write; one such context serves many frames, so a busy
	// stream allocates one per heartbeat interval, not one per frame.
	lastWrite := time.Now()
	var wait struct {
		ctx    context.Context // ctx, or a child of it with the heartbeat deadline
		cancel context.CancelFunc
	}
	wait.ctx = ctx
	defer func() {
		if wait.cancel != nil {
			wait.cancel()
		}
	}()
	for {
		if h.hb > 0 && wait.cancel == nil {
			wait.ctx, wait.cancel = context.WithDeadline(ctx, lastWrite.Add(h.hb))
		}
		ev, err := sub.Next(wait.ctx)
		if err != nil {
			if wait.cancel != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				wait.cancel()
				wait.ctx, wait.cancel = ctx, nil
				if time.Since(lastWrite) >= h.hb {
					sw.begin()
					if err := sw.end(sw.enc.Comment("heartbeat")); err != nil {
						return err
					}
					h.heartbeats.Add(1)
					lastWrite = time.Now()
				}
				continue
			}
			return err
		}
		sw.begin()
		if err := sw.end(sw.enc.Encode(ev)); err != nil {
			return err
		}
		h.frames.Add(1)
		lastWrite = time.Now()
	}
}

// streamWriter brackets each write of a stream with its deadline and flush.
type streamWriter struct {
	h       *Handler
	ctx     context.Context
	rc      *http.ResponseController
	enc     *Encoder
	noFlush bool // Flush is not supported
}

// begin sets the write deadline for the next write+flush.
func (sw *streamWriter) begin() {
	if sw.h.wt > 0 {
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.h.wt)) // ErrNotSupported: nothing to bound
	}
}

// end flushes after a write that returned err, counting a failure.
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

// parseRequest validates everything the request carries; the answer is a
// 400 naming the bad value.
func (h *Handler) parseRequest(r *http.Request) (string, eventbus.SubscribeOptions, *StatusError) {
	var o eventbus.SubscribeOptions
	bad := func(code, format string, args ...any) (string, eventbus.SubscribeOptions, *StatusError) {
		return "", o, &StatusError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	var sessionID string
	if h.o.SessionID != nil {
		sessionID = h.o.SessionID(r)
	} else {
		sessionID = r.PathValue("id")
	}
	if sessionID == "" {
		return bad(CodeInvalidSessionID, "empty session id")
	}
	if err := eventbus.CheckSessionID(sessionID); err != nil {
		return bad(CodeInvalidSessionID, "%s", err.Error())
	}
	q := r.URL.Query()

	if s := q.Get("scope"); s != "" {
		k, err := scope.Parse(s)
		if err != nil {
			return bad(CodeInvalidScope, "invalid scope %s (want session, descendants, subtree or all)", quoteCut(s))
		}
		o.Scope = k
	}
	if s := q.Get("maxQueued"); s != "" {
		n, reason := parseSeq(s)
		if reason == "" && (n < MinMaxQueued || n > MaxMaxQueued) {
			reason = "out of range"
		}
		if reason != "" {
			return bad(CodeInvalidMaxQueued, "invalid maxQueued %s: %s (want an integer %d–%d)",
				quoteCut(s), reason, MinMaxQueued, MaxMaxQueued)
		}
		o.MaxQueued = int(n)
	}
	switch s := q.Get("replay"); s {
	case "", "1":
	case "0":
		o.NoReplay = true
	default:
		return bad(CodeInvalidReplay, "invalid replay %s (want 0 or 1)", quoteCut(s))
	}

	epoch, err := ParseEpoch(r.Header.Get(HeaderEpoch))
	if err != nil {
		return bad(CodeInvalidEpoch, "%s", err.Error())
	}
	// Every cursor source is validated; the header (what a reconnecting
	// EventSource sends) wins over the query (which the URL keeps
	// repeating), and last_event_id over lastEventId.
	var cur *eventbus.Position
	for _, v := range [...]string{q.Get("lastEventId"), q.Get("last_event_id"), r.Header.Get("Last-Event-ID")} {
		c, err := ParseCursor(v)
		if err != nil {
			return bad(CodeInvalidLastEventID, "%s", err.Error())
		}
		if c != nil {
			cur = c
		}
	}
	if cur != nil && cur.Epoch == "" {
		cur.Epoch = epoch // an id without an epoch: the header's, if any
	}
	o.Cursor = cur
	if !h.bus.OverflowPolicySet() {
		// The default rule of config.Config.OverflowPolicy: an SSE client
		// resumes by itself, so evict rather than drop (Configure may
		// still choose another policy).
		o.Policy = eventbus.DefaultStreamOverflowPolicy
	}
	o.RequireSession = true
	o.Name = r.RemoteAddr
	return sessionID, o, nil
}
