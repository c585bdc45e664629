package ws

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/internal/framecache"
	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// Handler defaults.
const (
	// Pattern is the Go 1.22+ http.ServeMux pattern the handler is made for:
	// mux.Handle(ws.Pattern, h), beside sse.Pattern.
	Pattern = "GET /session/{id}/ws"
	// DefaultResumeWait is how long the handler waits for a first
	// {"resume": …} message when the URL carries no cursor.
	DefaultResumeWait = time.Second
	// DefaultPingInterval is the silence after which the server pings;
	// the peer must answer within the write timeout.
	DefaultPingInterval = 15 * time.Second
	// DefaultWriteTimeout bounds every write: a batch of frames, a pong or a
	// ping.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultCloseGrace bounds the close: after an eviction (from the moment
	// it happens) or any other close, the client_evicted frame and the close
	// frame have this long to go out and the close to be answered before the
	// socket is cut (OpenClaw's 1 s).
	DefaultCloseGrace = time.Second
)

// Close codes the handler uses (RFC 6455 §7.4.1); docs/protocol.md lists
// when each is sent.
const (
	CloseNormal          = websocket.StatusNormalClosure   // 1000: the session was closed, after session_closed
	CloseGoingAway       = websocket.StatusGoingAway       // 1001: the handler or the bus is shutting down
	CloseUnsupportedData = websocket.StatusUnsupportedData // 1003: a binary client message
	ClosePolicyViolation = websocket.StatusPolicyViolation // 1008: "slow consumer" after client_evicted, or an invalid client message
	CloseMessageTooBig   = websocket.StatusMessageTooBig   // 1009: a client message over ReadLimit
	CloseInternalError   = websocket.StatusInternalError   // 1011: a resume the bus refused unexpectedly
	CloseTryAgainLater   = websocket.StatusTryAgainLater   // 1013: a resume found the session at its subscriber cap
)

// SubprotocolBatch is the WebSocket subprotocol (Sec-WebSocket-Protocol,
// RFC 6455 §1.9) a client offers to receive batched messages: when the
// handler selects it, every server message is a JSON array of envelopes,
// [{…},{…}] — the frames of one batch (at most 64 frames or 64 KiB; a
// larger frame alone), in order, with one library Write per batch; a batch
// of one is still an array. Without it, each frame is a message of its
// own. docs/protocol.md, "Batched messages", has the rules; [SplitBatch]
// splits a message. [Client] offers it.
const SubprotocolBatch = "replaybus.batch.v1"

// ReasonSlowConsumer is the close reason sent with 1008 after
// client_evicted, OpenClaw's wording.
const ReasonSlowConsumer = "slow consumer"

// TypePong is the type of the synthetic frame (no id) that answers a ping
// message; its data is the ping's value.
const TypePong = "pong"

// TypeCancelResult is the type of the frame (no id, for the connection
// that sent it) that answers a cancel message; its data is
// [CancelResultData].
const TypeCancelResult = "cancel_result"

// CancelResultData is the data of a cancel_result frame: the answer POST
// /session/{id}/cancel gives the same cancel — Status 202 with Cancelled
// and Held (lists, empty when none), or an error status with Code and
// Message (400 invalid_turn_id, 403, 404, 409 turn_ended, 410, 503).
type CancelResultData struct {
	Status    int      `json:"status"`
	Cancelled []string `json:"cancelled,omitempty"`
	Held      []string `json:"held,omitempty"`
	Code      string   `json:"code,omitempty"`
	Message   string   `json:"message,omitempty"`
}

// HandlerOptions configure a [Handler]. The zero value is valid: PathValue
// session ids, no authorization, same-origin upgrades only, resume wait 1 s,
// ping every 15 s, write timeout 10 s, close grace 1 s, client messages up
// to 4 KiB.
type HandlerOptions struct {
	// SessionID extracts the session id; nil means r.PathValue("id"), as
	// on sse.HandlerOptions. See [resume.SessionIDFunc].
	SessionID resume.SessionIDFunc
	// Authorize admits or refuses a validated request before the upgrade
	// (403, or the *resume.StatusError its error is or wraps). See
	// [resume.AuthorizeFunc].
	Authorize resume.AuthorizeFunc
	// Configure may adjust the subscribe options derived from the request
	// before Subscribe. See [resume.ConfigureFunc].
	Configure resume.ConfigureFunc
	// OnSubscribe is called with the connection's subscription once the
	// resume is settled and before the first frame is written. See
	// [resume.OnSubscribeFunc].
	OnSubscribe resume.OnSubscribeFunc
	// AuthorizeCancel, when set, admits or refuses each cancel message,
	// with the upgrade request, as on turns.HandlerOptions (the By it sees
	// is the connection's ?client=). Nil: a connection may cancel the
	// turns of the session it watches. See [resume.AuthorizeCancelFunc].
	AuthorizeCancel resume.AuthorizeCancelFunc
	// OverflowPolicy is the overflow policy of each connection's
	// subscription (Configure may still change it). Empty means the bus's
	// Options.OverflowPolicy when that is set, else drop_subscriber (the
	// client resumes by itself), as on sse.HandlerOptions.
	OverflowPolicy eventbus.OverflowPolicy
	// Query says what to do with query parameters the endpoint does not
	// read, as on sse.HandlerOptions: by default only look-alikes of known
	// names (?lastEventID=) are refused; Query.Strict refuses every unknown
	// one but those in Query.Allow. See [resume.QueryRules].
	Query resume.QueryRules
	// Accept are the coder/websocket accept options: OriginPatterns to allow
	// cross-origin pages (by default only the request's own host may
	// connect), compression, subprotocols. Nil: the defaults. The handler
	// adds SubprotocolBatch after the subprotocols listed here (a copy: the
	// value is not modified), so a client offering one of them and the
	// batch gets the application's (a handshake selects one subprotocol).
	Accept *websocket.AcceptOptions
	// ResumeWait is how long, when the URL carries no cursor, the handler
	// waits for a first client message before it starts the stream as the
	// URL says; a first {"resume": {…}} with a cursor resumes from it. Zero
	// means DefaultResumeWait (1 s); negative does not wait (a cursor then
	// comes only in the URL or headers).
	ResumeWait time.Duration
	// PingInterval is the period of WebSocket pings; a peer that does not
	// answer one within WriteTimeout is cut off. Zero means
	// DefaultPingInterval (15 s); negative sends none.
	PingInterval time.Duration
	// WriteTimeout bounds every write: a frame that cannot be written
	// within it ends the connection. Only writes are bounded, so an idle
	// but healthy socket is never cut. Zero means DefaultWriteTimeout;
	// negative sets none.
	WriteTimeout time.Duration
	// CloseGrace bounds every close (see DefaultCloseGrace). Zero means
	// DefaultCloseGrace; it cannot be disabled.
	CloseGrace time.Duration
	// ReadLimit is the largest client message accepted, in bytes; a larger
	// one closes with 1009. Zero means MaxClientMessageBytes (4 KiB).
	ReadLimit int64
	// PlainIDs leaves the "epoch" field out of the frames and writes the
	// [resume.TypeStreamStart] cursor as a plain "<seq>": AgentPool's wire form,
	// where an id is only a number. False (the default) sends the epoch with
	// every id, so that a client resumes with both and a server restart is
	// an epoch_reset, never a silent resume in the new history.
	PlainIDs bool
	// MaxSessions caps the set of a many-sessions socket (ManyPattern):
	// zero means resume.DefaultMaxSessions (100); at most
	// resume.MaxMaxSessions. Over it: 400 too_many_sessions, or a
	// session_error frame for a subscribe message.
	MaxSessions int
	// Logger receives a debug record per connection end (with its close
	// code) and a warning per eviction. Nil: no logging.
	Logger *slog.Logger
}

// Handler serves one session's events over WebSocket: GET
// /session/{id}/ws, beside the SSE handler and with its query parameters,
// validation, Authorize hook and JSON error answers, then one JSON text
// message per frame (per batch of frames, a JSON array, for a client that
// negotiates [SubprotocolBatch]). See the package documentation for the protocol and
// the close codes.
//
// Each connection has three goroutines: the request's, which writes frames;
// one reading client messages; one sending pings and watching for eviction.
// All three end when the connection does. A Handler is safe for concurrent
// use. After [Handler.Close] it answers 503 and every connection closes
// with 1001.
type Handler struct {
	bus *eventbus.Bus
	o   HandlerOptions

	resumeWait, ping, wt, grace time.Duration
	readLimit                   int64
	maxSessions                 int

	hooks   serve.Hooks
	accept  *websocket.AcceptOptions // o.Accept with SubprotocolBatch added
	streams *serve.Registry[context.CancelFunc]
	cache   framecache.Cache // one encoding of each event, shared by every connection
	active  atomic.Int32     // open connections; with one, nothing is shared and the cache is skipped

	started, rejected, frames, evicted, protocolErrors, writeErrors, pongs, cancels atomic.Uint64
}

// NewHandler returns a Handler serving bus; it fails when bus is nil, when
// an entry of o.Accept.OriginPatterns is not a valid path.Match pattern
// (path.ErrBadPattern, naming the entry), and when o.OverflowPolicy is
// neither empty nor one of the bus's policies (an error naming the value
// that matches eventbus.ErrInvalid).
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	hooks := serve.Hooks{SessionID: o.SessionID, Authorize: o.Authorize, Configure: o.Configure, Query: o.Query,
		OverflowPolicy: o.OverflowPolicy}
	if err := hooks.Check("ws: NewHandler", bus); err != nil {
		return nil, err
	}
	if err := checkOriginPatterns(o.Accept); err != nil {
		return nil, err
	}
	h := &Handler{bus: bus, o: o, hooks: hooks, streams: serve.NewRegistry(func(cancel context.CancelFunc) { cancel() })}
	h.accept = withBatch(o.Accept)
	h.resumeWait = serve.DurationOr(o.ResumeWait, DefaultResumeWait)
	h.ping = serve.DurationOr(o.PingInterval, DefaultPingInterval)
	h.wt = serve.DurationOr(o.WriteTimeout, DefaultWriteTimeout)
	h.grace = o.CloseGrace
	if h.grace <= 0 {
		h.grace = DefaultCloseGrace
	}
	switch h.maxSessions = o.MaxSessions; {
	case h.maxSessions == 0:
		h.maxSessions = resume.DefaultMaxSessions
	case h.maxSessions < 0 || h.maxSessions > resume.MaxMaxSessions:
		return nil, fmt.Errorf("ws: NewHandler: MaxSessions %d out of range [1, %d]: %w", o.MaxSessions, resume.MaxMaxSessions, eventbus.ErrInvalid)
	}
	h.readLimit = o.ReadLimit
	if h.readLimit <= 0 {
		h.readLimit = MaxClientMessageBytes
	}
	return h, nil
}

// Stats are a Handler's counters; see [Handler.Stats]. Active is current,
// the others are totals since the handler was made. The JSON names are
// lowerCamel, as those of observe.Stats (the example server's GET /info
// carries both).
type Stats struct {
	Active         int    `json:"active"`         // connections open now
	Started        uint64 `json:"started"`        // connections upgraded
	Rejected       uint64 `json:"rejected"`       // requests answered with an error status before upgrading
	Frames         uint64 `json:"frames"`         // frames written (events, synthetic and targeted frames)
	Evicted        uint64 `json:"evicted"`        // connections evicted as slow consumers: closed 1008 "slow consumer", or cut at the end of the close grace when the peer read nothing
	ProtocolErrors uint64 `json:"protocolErrors"` // connections closed for an invalid, binary or too big client message
	WriteErrors    uint64 `json:"writeErrors"`    // connections ended by a failed or timed-out write or an unanswered ping
	Pongs          uint64 `json:"pongs"`          // pong frames answering ping messages
	Cancels        uint64 `json:"cancels"`        // cancel messages applied (a cancel_result with status 202)
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	return Stats{Active: h.streams.Each(nil), Started: h.started.Load(), Rejected: h.rejected.Load(), Frames: h.frames.Load(),
		Evicted: h.evicted.Load(), ProtocolErrors: h.protocolErrors.Load(), WriteErrors: h.writeErrors.Load(),
		Pongs: h.pongs.Load(), Cancels: h.cancels.Load()}
}

// Close makes the handler refuse new connections (503, Retry-After 5) and
// closes every open one with 1001 "going away" (within the write timeout
// and the close grace). It does not wait; see [Handler.Shutdown].
// Connections are hijacked, so http.Server.Shutdown does not see them:
// register Close with http.Server.RegisterOnShutdown. Idempotent; nil.
func (h *Handler) Close() error {
	h.streams.Close()
	return nil
}

// Shutdown is [Handler.Close] followed by waiting until every connection has
// ended, or until ctx ends (then it returns ctx's error).
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.streams.Shutdown(ctx)
}

// withBatch returns a copy of ao (nil: the defaults) whose subprotocols end
// with SubprotocolBatch: coder/websocket selects the first of the server's
// subprotocols the client offers, so an application's own come first.
func withBatch(ao *websocket.AcceptOptions) *websocket.AcceptOptions {
	var c websocket.AcceptOptions
	if ao != nil {
		c = *ao
	}
	if !slices.Contains(c.Subprotocols, SubprotocolBatch) {
		c.Subprotocols = append(slices.Clip(c.Subprotocols), SubprotocolBatch)
	}
	return &c
}

// reject answers a refused request: err as the *resume.StatusError it is,
// or as resume.StatusFor maps a bus error for session.
func (h *Handler) reject(w http.ResponseWriter, err error, session string) {
	h.rejected.Add(1)
	resume.WriteError(w, err, session)
}

// ServeHTTP validates the request as the SSE handler does, then the
// WebSocket handshake and its origin (answering 400/403/404/405/410/426/
// 429/503 as JSON before anything is subscribed), subscribes,
// upgrades, settles the resume, and writes frames until the connection
// ends; see the package documentation for the close codes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The handshake (upgrade headers, version, key, origin) is checked
	// after the query, by coder/websocket's rules, so that its refusals
	// are JSON like every other and a foreign page reaches neither
	// Authorize nor the bus. ?events= is accepted for parity: every frame
	// is one message either way.
	if h.o.SessionID == nil && r.PathValue("id") == "" && isMany(r) {
		h.serveMany(w, r, h.maxSessions)
		return
	}
	adm, err := serve.Admit(w, r, h.bus, h.hooks, func() error { return checkHandshake(w, r, h.accept) })
	if err != nil {
		h.reject(w, err, adm.Session)
		return
	}
	sessionID, opts := adm.Session, adm.Options

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, ok := h.streams.Add(cancel)
	if !ok {
		h.reject(w, &resume.StatusError{Status: http.StatusServiceUnavailable, Code: resume.CodeUnavailable,
			Message: "ws: handler closed", RetryAfter: 5 * time.Second}, sessionID)
		return
	}
	defer h.streams.Remove(id, nil)

	// Subscribe before upgrading, so that 404/410/429 are HTTP answers and
	// the slot is held. When a resume message may still come, this is a
	// placeholder without replay (no snapshot wasted on a client that is
	// about to send its cursor); awaitResume replaces it.
	await := opts.Cursor == nil && h.resumeWait > 0
	first := opts
	if await {
		first.NoReplay = true
	}
	// Where a live-only stream starts: the newest id before the
	// subscription (see resume.TypeStreamStart).
	start := h.bus.LastEventID()
	sub, err := h.bus.Subscribe(ctx, sessionID, first)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		h.reject(w, err, sessionID)
		return
	}
	defer func() { sub.Close() }()

	hr := &hijackRecorder{ResponseWriter: w, wt: h.wt}
	c, err := websocket.Accept(hr, r, h.accept)
	if err != nil {
		// checkHandshake let the request through, so this is a server
		// that cannot hijack (Accept answered 501 or 500).
		h.rejected.Add(1)
		return
	}
	h.started.Add(1)
	h.active.Add(1)
	defer h.active.Add(-1)
	c.SetReadLimit(h.readLimit)
	cn := &conn{h: h, c: c, raw: hr.conn, cork: hr.cork, ctx: ctx, cancel: cancel, sessionID: sessionID, remote: r.RemoteAddr,
		req: r, client: opts.Client,
		first: make(chan ClientMessage, 1), readDone: make(chan struct{}), keeperStop: make(chan struct{}),
		waiting: await, urlCursor: opts.Cursor != nil, batched: c.Subprotocol() == SubprotocolBatch}
	if await {
		// ParseRequest has refused a malformed header already.
		cn.hdrEpoch, _ = resume.ParseEpoch(r.Header.Get(resume.HeaderEpoch))
	}
	cn.readCtx, cn.stopRead = context.WithCancel(context.WithoutCancel(ctx))
	defer cn.finish()
	go cn.readLoop()

	live := opts.NoReplay && opts.Cursor == nil
	if await {
		var ok, replaced bool
		if sub, replaced, ok = cn.awaitResume(sub, opts); !ok {
			return
		}
		live = !replaced && opts.NoReplay
	}
	if live && !cn.writeStart(start) {
		cn.h.writeErrors.Add(1)
		return
	}
	if h.o.OnSubscribe != nil {
		h.o.OnSubscribe(r, sub)
	}
	keeperDone := make(chan struct{})
	go cn.keep(sub, keeperDone)
	defer func() { <-keeperDone }()
	defer cn.stopKeeper()
	cn.writeLoop(sub)
}
