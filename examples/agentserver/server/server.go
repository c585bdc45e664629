package server

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/observe"
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
	// WrapEvents, when set, wraps the SSE handler (GET
	// /session/{id}/events): middleware for authentication, logging, or
	// tests that cut connections.
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

	durable *durable.Handler // mounted on durable.Pattern

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
	o.SSE.OnSubscribe = s.greeter("sse", o.SSE.OnSubscribe)
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
	s.mux.Handle(sse.Pattern, events)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	})
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /info", s.info)
	s.mux.HandleFunc("GET /sessions", s.listSessions)
	s.mux.HandleFunc("POST /sessions", s.whenReady(s.createSession))
	s.mux.HandleFunc("POST /session/{id}/events", s.whenReady(s.publish))
	s.mux.HandleFunc("DELETE /session/{id}", s.whenReady(s.closeSession))
	if o.Durable.Logger == nil {
		o.Durable.Logger = o.Logger
	}
	if s.durable, err = durable.NewHandler(bus, o.Durable); err != nil {
		return nil, err
	}
	s.mux.Handle(durable.Pattern, s.whenReady(s.durable.ServeHTTP))
	return s, nil
}

// Bus returns the bus the server serves.
func (s *Server) Bus() *eventbus.Bus { return s.bus }

// SSE returns the SSE handler, for its [sse.Handler.Stats].
func (s *Server) SSE() *sse.Handler { return s.sse }

// Close ends every open SSE stream and makes the SSE endpoint send clients
// away with a retry: line from then on (see [sse.Handler.Close]), and
// closes every WebSocket with 1001 (see [ws.Handler.Close]), and stops the
// Durable Streams subscriptions' wake-ups (see [durable.Handler.Close]);
// the other routes keep working. Register
// it with http.Server.RegisterOnShutdown so that Shutdown does not wait for
// streams that never end. Idempotent; always nil.
func (s *Server) Close() error {
	_ = s.ws.Close() // every WebSocket gets 1001
	_ = s.durable.Close()
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
//	400 invalid_argument    the bus refused a value (empty type, control characters, …), a bad origin,
//	                        a query parameter on a POST, or one other than cascade on DELETE
//	404 not_found           no such route, or a path with an empty, "." or ".." segment (no redirect)
//	408 request_timeout     the body did not arrive within Options.BodyTimeout
//	415 unsupported_media_type  a body that is not Content-Type: application/json
//	415 unsupported_content_encoding  a POST with a Content-Encoding other than identity (gzip, …);
//	                        Accept-Encoding: identity
//	404 session_not_found   DELETE of, or POST of events to, a session nobody created
//	404 parent_not_found    POST /sessions with an unknown parent
//	405 method_not_allowed  the route exists for other methods (Allow lists them)
//	409 session_exists      POST /sessions with an id in use
//	409 cycle               the parent lies below the session
//	410 session_closed      the session (or the parent) was closed; POST /sessions
//	                        with the closed id reopens it (201)
//	413 body_too_large      a body over MaxBodyBytes
//	503 unavailable         the bus is closed, or its backend is down (Options.Ready; with Retry-After)
//	500 internal_error      any other failure of the bus
//
// The agentserver command adds one in front of it: 421 misdirected_request
// for a Host that is not a loopback name while it listens on loopback.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
	s.boundBody(w, r)
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

// boundBody bounds the arrival of r's body, when it has one, to
// BodyTimeout from now, for every route: the answer (a refusal or the 408
// of readBody) never waits for a body that does not come. Until readBody
// has the whole body, the HTTP/1 answer carries Connection: close:
// net/http would otherwise read (discard) the unread body before it writes
// an answer, and a body that never arrives would hold that answer until the
// deadline. After the answer net/http still reads what is left of the body
// (up to 256 KiB) to close cleanly, within the same deadline. Over HTTP/2 an
// unread body costs only its stream, and Connection: close would end the
// whole connection, so only the deadline is set.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) {
		return
	}
	if r.ProtoMajor < 2 {
		w.Header().Set("Connection", "close")
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout)) // ErrNotSupported: nothing to bound
}

// hasBody reports whether r comes with a body (a Content-Length above 0 or
// a chunked one).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// boundWrites sets the write deadline for r's answer to now +
// WriteTimeout (+ BodyTimeout for a request with a body, whose answer may
// come only when the body deadline has passed: the 408). The stream handlers take over from their first write: they
// set their own deadline before each write and clear it after (SSE), or
// after each write to the hijacked socket (WebSocket), so the deadline set
// here bounds only their refusals and the upgrade. A stream whose handler
// has no write timeout (its WriteTimeout < 0) gets none here either, and
// any deadline an earlier request left on the kept-alive connection is
// cleared, or it would cut the stream. Over HTTP/2 the deadline is the
// stream's own.
func (s *Server) boundWrites(w http.ResponseWriter, r *http.Request) {
	if s.writeTimeout <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	if _, pattern := s.mux.Handler(r); r.Method == http.MethodGet &&
		(pattern == sse.Pattern && s.o.SSE.WriteTimeout < 0 || pattern == ws.Pattern && s.o.WS.WriteTimeout < 0) {
		_ = rc.SetWriteDeadline(time.Time{}) // ErrNotSupported: nothing was set
		return
	}
	d := s.writeTimeout
	if hasBody(r) {
		d += s.bodyTimeout
	}
	_ = rc.SetWriteDeadline(time.Now().Add(d)) // ErrNotSupported: nothing to bound
}

// recorder captures what the mux's fallback handlers answer.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(p), nil
}

// healthz is GET /healthz: 200 {"status":"ok"}, or 503
// {"status":"unavailable","message":…} with Retry-After while
// Options.Ready reports the backend down.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if s.o.Ready != nil {
		if err := s.o.Ready(); err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "message": publicMessage(err)})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503 answered
// while Options.Ready reports the backend down.
const RetryAfterUnavailable = 1

// ready answers 503 unavailable with Retry-After when Options.Ready reports
// the backend down, and reports whether to go on.
func (s *Server) ready(w http.ResponseWriter) bool {
	if s.o.Ready == nil {
		return true
	}
	err := s.o.Ready()
	if err == nil {
		return true
	}
	writeUnavailable(w, err)
	return false
}

// writeUnavailable answers 503 unavailable with Retry-After, saying why.
func writeUnavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
	writeError(w, http.StatusServiceUnavailable, "unavailable", "the event bus's backend is unavailable, retry: "+publicMessage(err))
}

// whenReady runs h only while the backend is ready (see Options.Ready).
func (s *Server) whenReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.ready(w) {
			h(w, r)
		}
	}
}

// info is GET /info: what the page needs to start, and the counters.
func (s *Server) info(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	types := slices.Clone(s.types)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"epoch":          s.bus.Epoch(),
		"lastEventId":    s.bus.LastEventID(),
		"defaultSession": s.o.DefaultSession,
		"defaultScope":   s.o.DefaultScope.String(),
		"types":          types,
		"bus":            s.bus.Stats(),
		"sse":            s.sse.Stats(),
		"ws":             s.ws.Stats(),
	})
}

func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request) {
	list := s.bus.Sessions()
	slices.SortFunc(list, func(a, b observe.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, list)
}

type createRequest struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !checkQuery(w, r) || !s.readBody(w, r, &req, true) {
		return
	}
	if req.ID == "" {
		req.ID = newID()
	} else if msg := checkID("session id", req.ID); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_session_id", msg)
		return
	}
	if req.Parent != "" {
		if msg := checkID("parent", req.Parent); msg != "" {
			writeError(w, http.StatusBadRequest, "invalid_session_id", msg)
			return
		}
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if s.bus.SessionExists(req.ID) {
		writeError(w, http.StatusConflict, "session_exists", fmt.Sprintf("session %q already exists", req.ID))
		return
	}
	if err := s.bus.CreateSession(req.ID, req.Parent); err != nil {
		s.writeBusError(w, err)
		return
	}
	s.log.Debug("session created", "session", req.ID, "parent", req.Parent) // Debug: churn must not flood the log
	writeJSON(w, http.StatusCreated, map[string]string{"id": req.ID})
}

type publishRequest struct {
	Type   string          `json:"type"`
	Data   json.RawMessage `json:"data"`
	Origin string          `json:"origin"`
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	if !validPathID(w, r) {
		return
	}
	var req publishRequest
	if !checkQuery(w, r) || !s.readBody(w, r, &req, false) {
		return
	}
	if req.Type == "" {
		writeError(w, http.StatusBadRequest, "invalid_argument", `missing "type"`)
		return
	}
	if msg := checkOrigin(req.Origin); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_argument", msg)
		return
	}
	var data any
	if len(req.Data) > 0 && string(req.Data) != "null" {
		data = req.Data
	}
	// A session nobody created is a 404, as GET answers: a typo must not
	// create a session (the library's Publish keeps AgentPool's
	// create-on-first-publish; eventbus.Existing turns it off here).
	opts := []eventbus.PublishOption{eventbus.Existing()}
	if req.Origin != "" {
		opts = append(opts, eventbus.WithOrigin(req.Origin))
	}
	ev, err := s.bus.Publish(r.PathValue("id"), req.Type, data, opts...)
	if err != nil {
		s.writeSessionError(w, err, r.PathValue("id"))
		return
	}
	s.addType(req.Type)
	// The answer carries the epoch, and the id in the form the SSE stream
	// writes it (epoch-qualified unless HandlerOptions.PlainIDs), so that a
	// publisher that resumes from its own event uses a cursor that detects
	// a restart instead of silently pointing into the next incarnation.
	epoch := s.bus.Epoch()
	cursor := resume.FormatID(ev.ID, "")
	if !s.o.SSE.PlainIDs {
		cursor = resume.FormatID(ev.ID, epoch)
	}
	writeJSON(w, http.StatusAccepted, publishAnswer{ID: ev.ID, Epoch: epoch, Cursor: cursor})
}

// publishAnswer is the 202 answer of POST /session/{id}/events.
type publishAnswer struct {
	ID     uint64 `json:"id"`     // the event id
	Epoch  string `json:"epoch"`  // the bus epoch the id belongs to
	Cursor string `json:"cursor"` // the id as the SSE stream writes it, for Last-Event-ID
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	if !validPathID(w, r) || !checkQuery(w, r, "cascade") {
		return
	}
	id := r.PathValue("id")
	if !s.bus.SessionExists(id) && !s.bus.SessionClosed(id) {
		// The bus treats closing an unknown id as a no-op (AgentPool's
		// close_session); over HTTP a typo is worth a 404.
		writeError(w, http.StatusNotFound, resume.CodeSessionNotFound, resume.StatusFor(eventbus.ErrSessionNotFound, id).Message)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil || len(q["cascade"]) > 1 {
		writeError(w, http.StatusBadRequest, "invalid_argument",
			fmt.Sprintf("invalid query %s (want at most one cascade=0|1|true|false)", quote(r.URL.RawQuery)))
		return
	}
	switch c := q.Get("cascade"); c {
	case "", "0", "false":
		err = s.bus.CloseSession(id)
	case "1", "true":
		err = s.bus.CloseSessionTree(id)
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("cascade %s (want 0, 1, true or false)", quote(c)))
		return
	}
	if err != nil {
		s.writeBusError(w, err)
		return
	}
	s.log.Debug("session closed", "session", id)
	w.WriteHeader(http.StatusNoContent)
}

// addType records an event type for /info, up to maxTypes of them.
func (s *Server) addType(t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.types, t)
	if found || len(s.types) >= maxTypes {
		return
	}
	s.types = slices.Insert(s.types, i, t)
}

// writeBusError answers a bus error with its status and code (busStatus).
// A failure the client did not cause (500) while the backend is down
// (Options.Ready), or a backend failure (eventbus.ErrBackend), is 503 with
// Retry-After instead: the client should retry, not give up.
func (s *Server) writeBusError(w http.ResponseWriter, err error) {
	status, code := busStatus(err)
	if errors.Is(err, eventbus.ErrBackend) {
		writeUnavailable(w, err)
		return
	}
	if status == http.StatusInternalServerError && s.o.Ready != nil {
		if rerr := s.o.Ready(); rerr != nil {
			writeUnavailable(w, rerr)
			return
		}
	}
	writeError(w, status, code, publicMessage(err))
}

// writeSessionError is writeBusError for an operation on session id: an
// unknown or closed session is answered in the words of the stream routes
// (resume.StatusFor: `session "x" not found`, `session "x" closed`), so that
// every route says the same of the same session.
func (s *Server) writeSessionError(w http.ResponseWriter, err error, id string) {
	if errors.Is(err, eventbus.ErrSessionNotFound) || errors.Is(err, eventbus.ErrSessionClosed) {
		se := resume.StatusFor(err, id)
		writeError(w, se.Status, se.Code, se.Message)
		return
	}
	s.writeBusError(w, err)
}

// busStatus maps a bus error to its status and code.
func busStatus(err error) (int, string) {
	switch {
	case errors.Is(err, scope.ErrUnknownParent):
		return http.StatusNotFound, "parent_not_found"
	case errors.Is(err, scope.ErrCycle):
		return http.StatusConflict, "cycle"
	case errors.Is(err, scope.ErrExists):
		return http.StatusConflict, "session_exists"
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return http.StatusNotFound, "session_not_found"
	case errors.Is(err, eventbus.ErrSessionClosed):
		return http.StatusGone, "session_closed"
	case errors.Is(err, eventbus.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, eventbus.ErrInvalid):
		return http.StatusBadRequest, "invalid_argument"
	}
	return http.StatusInternalServerError, "internal_error"
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]string{"code": code, "message": message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"internal_error","message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// newID returns a random session id such as "s-1f2e3d4c5b6a".
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}
