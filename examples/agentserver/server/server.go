package server

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/replaybus/replaybus/adapters/browser"
	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

//go:embed web
var webFS embed.FS

// MaxBodyBytes bounds the JSON body of a POST.
const MaxBodyBytes = 1 << 20

// maxTypes bounds how many distinct event types /info lists.
const maxTypes = 256

// Options configure a [Server]. The zero value is valid.
type Options struct {
	// Logger receives one debug record per request and the SSE handler's
	// records; nil discards them.
	Logger *slog.Logger
	// SSE configures the SSE handler; a nil SSE.Logger is set to Logger.
	SSE sse.HandlerOptions
	// WrapEvents, when set, wraps the SSE handler's streams (GET
	// /session/{id}/events and GET /events): middleware for
	// authentication, logging, or tests that cut connections.
	WrapEvents func(http.Handler) http.Handler
	// DefaultSession is the session the page opens first; "" means the
	// first one listed.
	DefaultSession string
	// DefaultScope is the scope the page starts with; zero means
	// scope.Session.
	DefaultScope scope.Kind
	// BodyTimeout bounds how long a request with a body (every POST) may
	// take to deliver it, counted from when its headers were read; a
	// slower body is answered 408 request_timeout and its connection
	// closed. A request refused before its body is read (415, 404, 400, …)
	// is answered at once and its connection closed, at the latest when
	// BodyTimeout has passed, whether or not the body ever arrives.
	// Requests without a body (the SSE and WebSocket streams) are not
	// bounded by it. Zero means DefaultBodyTimeout (10 s).
	BodyTimeout time.Duration
	// WriteTimeout bounds writing each answer, counted from when the
	// request arrives: a client that sends requests and never reads the
	// answers has its connection closed when it passes, instead of pinning
	// the connection and its goroutine for good. The streams (GET
	// /session/{id}/events and /ws) are bounded by it only until their
	// first write; from then on their handlers bound each write themselves
	// (SSE.WriteTimeout, WS.WriteTimeout). Zero means DefaultWriteTimeout
	// (10 s); negative sets none.
	WriteTimeout time.Duration
	// WS configures the WebSocket handler (GET /session/{id}/ws); a nil
	// WS.Logger is set to Logger.
	WS ws.HandlerOptions
	// Durable configures the Durable Streams handler mounted on
	// durable.Pattern (/v1/stream/{name}: every session as a Durable
	// Stream, so the server's root is a Durable Streams base URL; see
	// docs/durable-streams.md); a nil Durable.Logger is set to Logger.
	Durable durable.HandlerOptions
	// Hello sends each new connection, SSE or WebSocket, a targeted
	// "hello" frame ([TypeHello]) once its replay is queued.
	Hello bool
	// Ready, when set, reports whether the bus's backend can serve (the
	// NATS connection of a node over NATS is up): a non-nil error makes
	// GET /healthz answer 503 {"status":"unavailable","message":…}, and the
	// routes that use the bus — POST /sessions, POST /session/{id}/events,
	// DELETE /session/{id} and the SSE and WebSocket streams — answer 503
	// unavailable with Retry-After instead of waiting for the backend (a
	// publish would time out as a 500, a stream would open empty). A
	// publish or create that fails while Ready reports an error is also
	// 503. It is called once per request on those routes and must be cheap
	// and safe for concurrent use. Nil means always ready (the in-memory
	// bus).
	Ready func() error
	// Turns configures the turn routes (adapters/turns: POST
	// /session/{id}/cancel, GET /session/{id}/turn and /presence); a nil
	// Turns.Logger is set to Logger, PlainIDs follows SSE.PlainIDs, and a
	// zero Turns.BodyTimeout is BodyTimeout (the cancel's 408 must come
	// within the answer's write deadline, which BodyTimeout sets).
	Turns turns.HandlerOptions
	// AgentRate is the simulated model's pace (POST
	// /session/{id}/messages), in text deltas per second; zero means
	// agent.DefaultTokensPerSecond (30). The agentserver command passes
	// -demo-rate.
	AgentRate float64
	// Types are event types the page listens for from the start, besides
	// the bus's own. Types published through POST /session/{id}/events are
	// added as they come (an EventSource only hears event types it has a
	// listener for).
	Types []string
}

// Server serves the agentserver API, SSE endpoint and page. Create it with
// [New]; it is safe for concurrent use.
type Server struct {
	bus *eventbus.Bus
	sse *sse.Handler
	ws  *ws.Handler
	mux *http.ServeMux
	log *slog.Logger
	o   Options

	durable  *durable.Handler // mounted on durable.Pattern
	turns    *turns.Handler   // mounted on the turns patterns
	agents   agents           // the simulated model's replies (turns.go)
	patterns []string         // every pattern mounted (see handle)

	bodyTimeout  time.Duration
	writeTimeout time.Duration

	mu    sync.Mutex
	types []string // sorted, bounded by maxTypes

	createMu sync.Mutex // makes POST /sessions' exists-check and create one step
}

// New returns a Server over bus. It fails when bus is nil or the SSE
// handler cannot be made.
func New(bus *eventbus.Bus, o Options) (*Server, error) {
	if bus == nil {
		return nil, errors.New("server: nil bus")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SSE.Logger == nil {
		o.SSE.Logger = o.Logger
	}
	s := &Server{mux: http.NewServeMux(), bus: bus, log: o.Logger, o: o, bodyTimeout: o.BodyTimeout}
	s.agents.ctx, s.agents.stop = context.WithCancelCause(context.Background())
	o.SSE.OnSubscribe = s.greeter("sse", o.SSE.OnSubscribe)
	if o.SSE.BodyTimeout == 0 && o.BodyTimeout > 0 {
		o.SSE.BodyTimeout = o.BodyTimeout // the server's bound on every body, the change route's too
	}
	h, err := sse.NewHandler(bus, o.SSE)
	if err != nil {
		return nil, err
	}
	s.sse = h
	if err := s.newWS(); err != nil {
		return nil, err
	}
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	switch {
	case o.WriteTimeout == 0:
		s.writeTimeout = DefaultWriteTimeout
	case o.WriteTimeout > 0:
		s.writeTimeout = o.WriteTimeout
	}
	for _, t := range []string{frame.TypeStateResyncRequired, frame.TypeReplayComplete,
		frame.TypeSlowClientWarning, frame.TypeClientEvicted, frame.TypeSessionClosed, "message", TypeHello} {
		s.addType(t)
	}
	for _, t := range o.Types {
		s.addType(t)
	}

	static, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	var events http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if validPathID(w, r) && s.ready(w) {
			h.ServeHTTP(w, r)
		}
	})
	if o.WrapEvents != nil {
		events = o.WrapEvents(events)
	}
	s.handle(sse.Pattern, events)
	// Many sessions on one connection: the stream at /events, the route
	// that changes its set, and the WebSocket at /ws (docs/protocol.md).
	var many http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ready(w) {
			h.ServeHTTP(w, r)
		}
	})
	s.handle(sse.ChangePattern, many)
	if o.WrapEvents != nil {
		many = o.WrapEvents(many)
	}
	s.handle(sse.ManyPattern, many)
	s.handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	}))
	s.handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.handle(browser.Pattern, browser.Handler{})
	s.handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.handle("GET /info", http.HandlerFunc(s.info))
	s.handle("GET /sessions", http.HandlerFunc(s.listSessions))
	s.handle("POST /sessions", s.whenReady(s.createSession))
	s.handle("POST /session/{id}/events", s.whenReady(s.publish))
	s.handle("DELETE /session/{id}", s.whenReady(s.closeSession))
	if o.Durable.Logger == nil {
		o.Durable.Logger = o.Logger
	}
	if s.durable, err = durable.NewHandler(bus, o.Durable); err != nil {
		return nil, err
	}
	s.handle(durable.Pattern, s.whenReady(s.durable.ServeHTTP))
	if err := s.mountTurns(); err != nil {
		return nil, err
	}
	if err := s.mountFrontends(); err != nil {
		return nil, err
	}
	for _, t := range []string{frame.TypeTurnStart, frame.TypeTurnCancel, frame.TypeTurnEnd, frame.TypePresence} {
		s.addType(t)
	}
	return s, nil
}

// Bus returns the bus the server serves.
func (s *Server) Bus() *eventbus.Bus { return s.bus }

// SSE returns the SSE handler, for its [sse.Handler.Stats].
func (s *Server) SSE() *sse.Handler { return s.sse }

// Close ends every open SSE stream and makes the SSE endpoint send clients
// away with a retry: line from then on (see [sse.Handler.Close]), and
// closes every WebSocket with 1001 (see [ws.Handler.Close]), stops the
// Durable Streams subscriptions' wake-ups (see [durable.Handler.Close]) and
// the simulated model's turns (as [Server.StopAgents], without waiting);
// the other routes keep working. Register
// it with http.Server.RegisterOnShutdown so that Shutdown does not wait for
// streams that never end. Idempotent; always nil.
func (s *Server) Close() error {
	_ = s.ws.Close() // every WebSocket gets 1001
	_ = s.durable.Close()
	s.agents.halt()
	return s.sse.Close()
}

// Durable returns the Durable Streams handler (mounted on durable.Pattern).
func (s *Server) Durable() *durable.Handler { return s.durable }

// ServeHTTP routes r. The Durable Streams route (durable.Pattern,
// /v1/stream/{name}) answers as docs/durable-streams.md says. Besides that
// and the answers of the SSE and WebSocket endpoints (docs/protocol.md),
// errors are:
//
//	400 invalid_json        the body is not the JSON object the route takes (the message says at which byte)
//	400 invalid_session_id  an id (path, "id" or "parent") the bus refuses or that is not one URL path segment
//	400 invalid_session_id  also an explicit empty "id" in POST /sessions (leave it out for a generated one)
//	400 invalid_argument    the bus refused a value (empty type, control characters, …), a bad origin,
//	                        a cascade other than 0, 1, true or false
//	400 unknown_query_parameter  a query parameter on a POST, or one other than cascade on DELETE
//	                        (the stream routes' code for a parameter they do not read)
//	400 invalid_query       a query that does not parse, or repeats a parameter (as on the stream routes)
//	400 invalid_producer    a publish with some but not all of Producer-Id, Producer-Epoch, Producer-Seq,
//	                        or an epoch or sequence that is not an unsigned integer
//	403 stale_producer_epoch  a publish of a producer's epoch below the one in force (Producer-Epoch names it)
//	404 not_found           no such route, or a path with an empty, "." or ".." segment (no redirect)
//	408 request_timeout     the body did not arrive within Options.BodyTimeout
//	415 unsupported_media_type  a body that is not Content-Type: application/json
//	415 unsupported_content_encoding  a POST with a Content-Encoding other than identity (gzip, …);
//	                        Accept-Encoding: identity
//	400 invalid_turn_id     a "turn" (messages, cancel) that is not a turn id
//	403 forbidden_origin    a cancel posted by a browser page of another origin
//	404 session_not_found   DELETE of, or POST of events to, a session nobody created
//	404 parent_not_found    POST /sessions with an unknown parent
//	405 method_not_allowed  the route exists for other methods (Allow lists them)
//	409 session_exists      POST /sessions with an id in use
//	409 cycle               the parent lies below the session
//	409 producer_seq_gap    a publish of a producer's sequence past the next (Producer-Expected-Seq names it)
//	409 turn_active         a message while the session's turn runs (the message names the turn)
//	409 turn_ended          a cancel of a turn that has ended, or a message that reuses its id
//	410 session_closed      the session (or the parent) was closed; POST /sessions
//	                        with the closed id reopens it (201)
//	413 body_too_large      a body over MaxBodyBytes
//	503 unavailable         the bus is closed, or its backend is down (Options.Ready; with Retry-After),
//	                        or a message after StopAgents
//	500 internal_error      any other failure of the bus
//	501 not_implemented     a producer's publish on a bus that cannot check producers
//
// The agentserver command adds one in front of it: 421 misdirected_request
// for a Host that is not a loopback name while it listens on loopback.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
	defer s.boundBody(w, r)()
	s.boundWrites(w, r)
	if !cleanPath(r.URL.EscapedPath()) {
		writeError(w, http.StatusNotFound, "not_found",
			fmt.Sprintf("no route for %s %s (empty or dot path segment)", r.Method, quote(r.URL.Path)))
		return
	}
	if allow := streamAllow(s.mux, r); allow != "" && r.Method == http.MethodHead {
		// GET routes match HEAD in the mux, but a stream has no
		// headers-only form: say so, with the methods the path takes.
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("method HEAD not allowed on %s (allowed: %s)", r.URL.Path, allow))
		return
	}
	if h, pattern := s.mux.Handler(r); pattern == "" {
		// The mux would answer in plain text: find out what it would say.
		rec := &recorder{header: make(http.Header)}
		h.ServeHTTP(rec, r)
		switch rec.code {
		case http.StatusNotFound:
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
			return
		case http.StatusMethodNotAllowed:
			allow := rec.header.Get("Allow")
			if a := streamAllow(s.mux, r); a != "" {
				allow = a // not the mux's "GET, HEAD, POST": HEAD is refused
			}
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}
