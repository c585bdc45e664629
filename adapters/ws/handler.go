package ws

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
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
	// DefaultWriteTimeout bounds every write of a frame, a pong or a ping.
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

// ReasonSlowConsumer is the close reason sent with 1008 after
// client_evicted, OpenClaw's wording.
const ReasonSlowConsumer = "slow consumer"

// TypePong is the type of the synthetic frame (no id) that answers a ping
// message; its data is the ping's value.
const TypePong = "pong"

// HandlerOptions configure a [Handler]. The zero value is valid: PathValue
// session ids, no authorization, same-origin upgrades only, resume wait 1 s,
// ping every 15 s, write timeout 10 s, close grace 1 s, client messages up
// to 4 KiB.
type HandlerOptions struct {
	// SessionID extracts the session id; nil means r.PathValue("id"). As on
	// sse.HandlerOptions.
	SessionID func(r *http.Request) string
	// Authorize is called after validation and before anything is
	// subscribed; an error answers 403 forbidden (or the *resume.StatusError it
	// is or wraps) before the upgrade. As on sse.HandlerOptions.
	Authorize func(r *http.Request, sessionID string, sc scope.Kind) error
	// Configure may adjust the subscribe options derived from the request
	// before Subscribe (policy, byte limit, …). As on sse.HandlerOptions.
	Configure func(r *http.Request, o *eventbus.SubscribeOptions)
	// OnSubscribe is called with the connection's subscription once the
	// resume is settled and before the first frame is written, on the
	// request's goroutine, so the application can target it with
	// [eventbus.Bus.SendTo] (a frame sent here arrives after the replay and
	// replay_complete). The subscription ends with the connection; watch
	// sub.Done() rather than keep it.
	OnSubscribe func(r *http.Request, sub *eventbus.Subscription)
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
	// connect), compression, subprotocols. Nil: the defaults.
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
	// Logger receives a debug record per connection end (with its close
	// code) and a warning per eviction. Nil: no logging.
	Logger *slog.Logger
}

// Handler serves one session's events over WebSocket: GET
// /session/{id}/ws, beside the SSE handler and with its query parameters,
// validation, Authorize hook and JSON error answers, then one JSON text
// message per frame. See the package documentation for the protocol and
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

	hooks   serve.Hooks
	streams *serve.Registry[context.CancelFunc]

	started, rejected, frames, evicted, protocolErrors, writeErrors, pongs atomic.Uint64
}

// NewHandler returns a Handler serving bus; it fails when bus is nil, when
// an entry of o.Accept.OriginPatterns is not a valid path.Match pattern
// (path.ErrBadPattern, naming the entry), and when o.OverflowPolicy is
// neither empty nor one of the bus's policies (an error naming the value
// that matches eventbus.ErrInvalid).
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil {
		return nil, errors.New("ws: NewHandler: nil bus")
	}
	if err := checkOriginPatterns(o.Accept); err != nil {
		return nil, err
	}
	h := &Handler{bus: bus, o: o, streams: serve.NewRegistry(func(cancel context.CancelFunc) { cancel() })}
	h.hooks = serve.Hooks{SessionID: o.SessionID, Authorize: o.Authorize, Configure: o.Configure, Query: o.Query,
		OverflowPolicy: o.OverflowPolicy}
	if err := h.hooks.Check("ws: NewHandler"); err != nil {
		return nil, err
	}
	h.resumeWait = serve.DurationOr(o.ResumeWait, DefaultResumeWait)
	h.ping = serve.DurationOr(o.PingInterval, DefaultPingInterval)
	h.wt = serve.DurationOr(o.WriteTimeout, DefaultWriteTimeout)
	h.grace = o.CloseGrace
	if h.grace <= 0 {
		h.grace = DefaultCloseGrace
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
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	return Stats{Active: h.streams.Each(nil), Started: h.started.Load(), Rejected: h.rejected.Load(), Frames: h.frames.Load(),
		Evicted: h.evicted.Load(), ProtocolErrors: h.protocolErrors.Load(), WriteErrors: h.writeErrors.Load(),
		Pongs: h.pongs.Load()}
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
	_ = h.Close()
	return h.streams.Wait(ctx)
}

func (h *Handler) reject(w http.ResponseWriter, e *resume.StatusError) {
	h.rejected.Add(1)
	e.Answer(w)
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
	adm, serr := serve.Admit(w, r, h.bus, h.hooks, func() *resume.StatusError { return checkHandshake(w, r, h.o.Accept) })
	if serr != nil {
		h.reject(w, serr)
		return
	}
	sessionID, opts := adm.Session, adm.Options

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, ok := h.streams.Add(cancel)
	if !ok {
		h.reject(w, &resume.StatusError{Status: http.StatusServiceUnavailable, Code: resume.CodeUnavailable,
			Message: "ws: handler closed", RetryAfter: 5 * time.Second})
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
		h.reject(w, resume.StatusFor(err, sessionID))
		return
	}
	defer func() { sub.Close() }()

	hr := &hijackRecorder{ResponseWriter: w, wt: h.wt}
	c, err := websocket.Accept(hr, r, h.o.Accept)
	if err != nil {
		// checkHandshake let the request through, so this is a server
		// that cannot hijack (Accept answered 501 or 500).
		h.rejected.Add(1)
		return
	}
	h.started.Add(1)
	c.SetReadLimit(h.readLimit)
	cn := &conn{h: h, c: c, raw: hr.conn, cork: hr.cork, ctx: ctx, cancel: cancel, sessionID: sessionID, remote: r.RemoteAddr,
		first: make(chan ClientMessage, 1), readDone: make(chan struct{}), keeperStop: make(chan struct{}),
		waiting: await, urlCursor: opts.Cursor != nil}
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

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// conn is one upgraded connection.
type conn struct {
	h         *Handler
	c         *websocket.Conn
	raw       net.Conn  // the hijacked connection
	cork      *corkConn // the writes' path to it
	ctx       context.Context
	cancel    context.CancelFunc
	sessionID string
	remote    string
	urlCursor bool // the request carried a cursor (URL or header)

	readCtx  context.Context
	stopRead context.CancelFunc
	readDone chan struct{}
	// The first client message, handed to awaitResume while it waits
	// (waiting true); buffered so the reader never blocks on it.
	firstMu sync.Mutex
	waiting bool
	first   chan ClientMessage

	keeperStop chan struct{}
	keeperOnce sync.Once

	closeOnce sync.Once
	evictOnce sync.Once
	killOnce  sync.Once
	kill      *time.Timer
}

// armKill cuts the socket after the close grace unless the connection has
// ended before; armed at most once.
func (cn *conn) armKill() {
	cn.killOnce.Do(func() {
		cn.kill = time.AfterFunc(cn.h.grace, func() {
			_ = cn.raw.Close()
			_ = cn.c.CloseNow()
		})
	})
}

// evicted notes the eviction once — counted, logged — and starts the close
// grace: client_evicted and the 1008 close frame go out within it if the
// peer reads at all, and the socket is cut at its end regardless.
func (cn *conn) evicted() {
	cn.evictOnce.Do(func() {
		cn.h.evicted.Add(1)
		cn.armKill()
		if cn.h.o.Logger != nil {
			cn.h.o.Logger.LogAttrs(context.Background(), slog.LevelWarn, "ws: slow consumer evicted",
				slog.String("session", cn.sessionID), slog.String("remote", cn.remote))
		}
	})
}

// closeWith closes the connection with code and reason, once: the close
// frame is written and the peer's answer awaited within the close grace.
func (cn *conn) closeWith(code websocket.StatusCode, reason string) {
	cn.closeOnce.Do(func() {
		cn.armKill()
		_ = cn.c.Close(code, closeReason(reason))
		if cn.h.o.Logger != nil {
			cn.h.o.Logger.LogAttrs(context.Background(), slog.LevelDebug, "ws: connection closed",
				slog.String("session", cn.sessionID), slog.String("remote", cn.remote),
				slog.Int("code", int(code)), slog.String("reason", reason))
		}
	})
}

// abort ends the connection without a close frame (a broken socket).
func (cn *conn) abort() {
	cn.closeOnce.Do(func() { _ = cn.c.CloseNow() })
}

// finish releases everything: the reader, the write context, the timer.
func (cn *conn) finish() {
	cn.abort() // no-op after a close
	cn.cancel()
	cn.stopRead()
	<-cn.readDone
	cn.killOnce.Do(func() {}) // no timer after this point
	if cn.kill != nil {
		cn.kill.Stop()
	}
}

// writeStart writes the resume.TypeStreamStart frame of a live-only stream;
// false when the write failed.
func (cn *conn) writeStart(start uint64) bool {
	epoch, idEpoch := cn.h.bus.Epoch(), cn.h.bus.Epoch()
	if cn.h.o.PlainIDs {
		idEpoch = ""
	}
	b := resume.AppendEnvelope(nil, resume.StartEvent(cn.sessionID, resume.FormatID(start, idEpoch), epoch), "")
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if cn.h.wt > 0 {
		ctx, cancel = context.WithTimeout(ctx, cn.h.wt)
	}
	defer cancel()
	if err := cn.c.Write(ctx, websocket.MessageText, b); err != nil {
		cn.abort()
		return false
	}
	cn.h.frames.Add(1)
	return true
}

// awaitResume waits for the first client message (or ResumeWait) and
// returns the subscription to stream: sub, or (replaced) a new one made
// from the resume message's cursor or the URL's replay. ok is false when
// the connection has ended.
func (cn *conn) awaitResume(sub *eventbus.Subscription, opts eventbus.SubscribeOptions) (_ *eventbus.Subscription, replaced, ok bool) {
	t := time.NewTimer(cn.h.resumeWait)
	defer t.Stop()
	var m ClientMessage
	select {
	case m = <-cn.first:
	case <-t.C:
		cn.firstMu.Lock()
		cn.waiting = false
		cn.firstMu.Unlock()
		select {
		case m = <-cn.first: // it came just now
		default:
		}
	case <-cn.ctx.Done():
		cn.closeEnded(nil)
		return sub, false, false
	}
	switch {
	case m.Resume != nil && m.Resume.Cursor != nil:
		opts.Cursor, opts.NoReplay = &eventbus.Position{ID: m.Resume.Cursor.ID}, false
		if m.Resume.Epoch != "" {
			opts.Cursor.Epoch = resume.BusEpoch(m.Resume.Epoch, cn.h.bus.Epoch())
		}
	case opts.NoReplay:
		return sub, false, true // the placeholder is what the URL asked for
	}
	// Replaced: what the placeholder queued meanwhile is in the replay
	// buffer, and the new subscription replays it.
	sub.Close()
	ns, err := cn.h.bus.Subscribe(cn.ctx, cn.sessionID, opts)
	if err != nil {
		code, reason := closeFor(err)
		cn.closeWith(code, reason)
		return sub, false, false
	}
	return ns, true, true
}

// closeFor maps a Subscribe error after the upgrade to a close code.
func closeFor(err error) (websocket.StatusCode, string) {
	switch {
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return CloseTryAgainLater, resume.CodeSubscriberLimit
	case errors.Is(err, eventbus.ErrSessionClosed):
		return CloseNormal, resume.CodeSessionClosed
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return ClosePolicyViolation, resume.CodeSessionNotFound
	case errors.Is(err, eventbus.ErrClosed):
		return CloseGoingAway, "server shutting down"
	case errors.Is(err, eventbus.ErrInvalid):
		return ClosePolicyViolation, "invalid_request: " + err.Error()
	}
	return CloseInternalError, "internal_error"
}

// maxBatch bounds the frames written between two flushes.
const maxBatch = 64

// writeLoop writes every frame of sub until the subscription or the
// connection ends, then closes with the code the end calls for. Frames that
// are ready together go out with one flush (corkConn), up to maxBatch.
func (cn *conn) writeLoop(sub *eventbus.Subscription) {
	w := frameWriter{cn: cn, sub: sub, done: sub.Done(), buf: make([]byte, 0, 1024)}
	if !cn.h.o.PlainIDs {
		w.epoch = cn.h.bus.Epoch()
	}
	for {
		ev, err := sub.Next(cn.ctx)
		if err != nil {
			cn.closeEnded(err)
			return
		}
		cn.cork.corkWrites()
		ok := w.write(ev)
		for n := 1; ok && n < maxBatch; n++ {
			ev, more := sub.TryNext()
			if !more {
				break
			}
			ok = w.write(ev)
		}
		if err := cn.cork.uncork(); err != nil || !ok {
			if cn.ctx.Err() == nil || cn.h.streams.Closed() {
				cn.h.writeErrors.Add(1)
			}
			cn.abort()
			return
		}
	}
}

// frameWriter writes single frames for writeLoop.
type frameWriter struct {
	cn    *conn
	sub   *eventbus.Subscription
	epoch string
	done  <-chan struct{}
	buf   []byte
}

// write writes ev as one text message; false when the write failed.
func (w *frameWriter) write(ev eventbus.Event) bool {
	select {
	case <-w.done:
		if errors.Is(w.sub.Err(), eventbus.ErrEvicted) && ev.Type != frame.TypeClientEvicted {
			// Evicted: what is still queued is in the replay buffer for
			// the resume; go straight to client_evicted so that it and
			// the close frame fit in the grace.
			for ev.Type != frame.TypeClientEvicted {
				var ok bool
				if ev, ok = w.sub.TryNext(); !ok {
					return true // nothing left: Next reports the eviction
				}
			}
		}
	default:
	}
	w.buf = resume.AppendEnvelope(w.buf[:0], ev, w.epoch)
	// No context deadline: the bytes go to the cork, and every socket
	// write has its deadline there (a context would cost a timer per frame).
	if err := w.cn.c.Write(context.Background(), websocket.MessageText, w.buf); err != nil {
		return false
	}
	w.cn.h.frames.Add(1)
	if cap(w.buf) > 64<<10 {
		w.buf = make([]byte, 0, 1024)
	}
	return true
}

// closeEnded closes the connection for the end of its subscription.
func (cn *conn) closeEnded(err error) {
	switch {
	case errors.Is(err, eventbus.ErrEvicted):
		cn.evicted()
		cn.closeWith(ClosePolicyViolation, ReasonSlowConsumer)
	case errors.Is(err, eventbus.ErrSessionClosed):
		cn.closeWith(CloseNormal, "session closed")
	case errors.Is(err, eventbus.ErrClosed) || cn.h.streams.Closed():
		cn.closeWith(CloseGoingAway, "server shutting down")
	default:
		// The reader ended (the peer closed, or a protocol error was
		// answered) or a write failed: nothing more to say.
		cn.abort()
	}
}

// readLoop reads client messages until the connection ends. While the
// handler waits for a resume, the first message goes to cn.first.
func (cn *conn) readLoop() {
	defer close(cn.readDone)
	defer cn.cancel() // the peer is gone, or broke the protocol: end the stream
	firstDone := false
	for {
		typ, b, err := cn.c.Read(cn.readCtx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				cn.h.protocolErrors.Add(1) // the library sent 1009 itself
			}
			return
		}
		if typ != websocket.MessageText {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(CloseUnsupportedData, "binary messages are not accepted (want JSON text)")
			return
		}
		m, err := ParseClientMessage(b)
		if err != nil {
			cn.h.protocolErrors.Add(1)
			var me *MessageError
			errors.As(err, &me)
			cn.closeWith(ClosePolicyViolation, "invalid message: "+me.Reason)
			return
		}
		first := !firstDone
		if first {
			firstDone = true
			cn.firstMu.Lock()
			waiting := cn.waiting
			if waiting {
				cn.first <- m // buffered, and the only send
			}
			cn.firstMu.Unlock()
			if !waiting && !cn.urlCursor && m.Resume != nil && m.Resume.Cursor != nil {
				// The wait is over: the stream started as the URL said.
				// (With a cursor in the URL there was no wait: the check
				// below names that.)
				cn.h.protocolErrors.Add(1)
				cn.closeWith(ClosePolicyViolation, "resume too late: send it first, within the resume wait")
				return
			}
		}
		if m.Resume != nil && !first {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(ClosePolicyViolation, "resume must be the first message")
			return
		}
		if m.Resume != nil && cn.urlCursor && m.Resume.Cursor != nil {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(ClosePolicyViolation, "resume with a cursor, but the URL already carries one")
			return
		}
		if m.Ping != nil {
			if err := cn.pong(m.Ping); err != nil {
				return
			}
		}
	}
}

// pong answers a ping message with a pong frame.
func (cn *conn) pong(v []byte) error {
	b := resume.AppendEnvelope(nil, eventbus.Event{Type: TypePong, Session: cn.sessionID, Data: v}, "")
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if cn.h.wt > 0 {
		ctx, cancel = context.WithTimeout(ctx, cn.h.wt)
	}
	defer cancel()
	if err := cn.c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	cn.h.pongs.Add(1)
	return nil
}

func (cn *conn) stopKeeper() {
	cn.keeperOnce.Do(func() { close(cn.keeperStop) })
}

// keep pings the peer every PingInterval (cutting it off when a pong does
// not come within WriteTimeout) and starts the close grace the moment the
// subscription is evicted, so that a writer stuck on a peer that stopped
// reading cannot hold the socket past it.
func (cn *conn) keep(sub *eventbus.Subscription, done chan<- struct{}) {
	defer close(done)
	var tick <-chan time.Time
	if cn.h.ping > 0 {
		t := time.NewTicker(cn.h.ping)
		defer t.Stop()
		tick = t.C
	}
	subDone := sub.Done()
	for {
		select {
		case <-cn.keeperStop:
			return
		case <-cn.ctx.Done():
			return
		case <-subDone:
			subDone = nil
			if errors.Is(sub.Err(), eventbus.ErrEvicted) {
				cn.evicted()
			}
		case <-tick:
			ctx, cancel := context.WithTimeout(cn.ctx, max(cn.h.wt, time.Second))
			err := cn.c.Ping(ctx)
			cancel()
			if err != nil {
				if cn.ctx.Err() == nil {
					cn.h.writeErrors.Add(1)
					cn.abort()
					cn.cancel()
				}
				return
			}
		}
	}
}
