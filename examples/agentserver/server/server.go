package server

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
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
	mux *http.ServeMux
	log *slog.Logger
	o   Options

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
	h, err := sse.NewHandler(bus, o.SSE)
	if err != nil {
		return nil, err
	}
	s := &Server{bus: bus, sse: h, mux: http.NewServeMux(), log: o.Logger, o: o}
	for _, t := range []string{eventbus.TypeStateResyncRequired, eventbus.TypeReplayComplete,
		eventbus.TypeSlowClientWarning, eventbus.TypeClientEvicted, eventbus.TypeSessionClosed, "message"} {
		s.addType(t)
	}
	for _, t := range o.Types {
		s.addType(t)
	}

	static, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	var events http.Handler = h
	if o.WrapEvents != nil {
		events = o.WrapEvents(h)
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
	s.mux.HandleFunc("POST /sessions", s.createSession)
	s.mux.HandleFunc("POST /session/{id}/events", s.publish)
	s.mux.HandleFunc("DELETE /session/{id}", s.closeSession)
	return s, nil
}

// Bus returns the bus the server serves.
func (s *Server) Bus() *eventbus.Bus { return s.bus }

// SSE returns the SSE handler, for its [sse.Handler.Stats].
func (s *Server) SSE() *sse.Handler { return s.sse }

// Close ends every open SSE stream and makes the SSE endpoint answer 503 from
// then on (see [sse.Handler.Close]); the other routes keep working. Register
// it with http.Server.RegisterOnShutdown so that Shutdown does not wait for
// streams that never end. Idempotent; always nil.
func (s *Server) Close() error { return s.sse.Close() }

// ServeHTTP routes r. Besides the SSE endpoint's answers, errors are:
//
//	400 invalid_json        the body is not the JSON object the route takes
//	400 invalid_argument    the bus refused a value (empty type, control characters, …)
//	404 not_found           no such route
//	404 session_not_found   DELETE of, or POST of events to, a session nobody created
//	404 parent_not_found    POST /sessions with an unknown parent
//	405 method_not_allowed  the route exists for other methods (Allow lists them)
//	409 session_exists      POST /sessions with an id in use
//	409 cycle               the parent lies below the session
//	410 session_closed      the session (or the parent) was closed; POST /sessions
//	                        with the closed id reopens it (201)
//	413 body_too_large      a body over MaxBodyBytes
//	503 unavailable         the bus is closed
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
	if h, pattern := s.mux.Handler(r); pattern == "" {
		// The mux would answer in plain text: find out what it would say.
		rec := &recorder{header: make(http.Header)}
		h.ServeHTTP(rec, r)
		switch rec.code {
		case http.StatusNotFound:
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
			return
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
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

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
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
	})
}

func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request) {
	list := s.bus.Sessions()
	slices.SortFunc(list, func(a, b eventbus.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, list)
}

type createRequest struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	if req.ID == "" {
		req.ID = newID()
	} else if strings.Contains(req.ID, "/") {
		writeError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("session id %q contains '/'", req.ID))
		return
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if s.bus.SessionExists(req.ID) {
		writeError(w, http.StatusConflict, "session_exists", fmt.Sprintf("session %q already exists", req.ID))
		return
	}
	if err := s.bus.CreateSession(req.ID, req.Parent); err != nil {
		writeBusError(w, err)
		return
	}
	s.log.Info("session created", "session", req.ID, "parent", req.Parent)
	writeJSON(w, http.StatusCreated, map[string]string{"id": req.ID})
}

type publishRequest struct {
	Type   string          `json:"type"`
	Data   json.RawMessage `json:"data"`
	Origin string          `json:"origin"`
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	var req publishRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	if req.Type == "" {
		writeError(w, http.StatusBadRequest, "invalid_argument", `missing "type"`)
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
		writeBusError(w, err)
		return
	}
	s.addType(req.Type)
	writeJSON(w, http.StatusAccepted, map[string]uint64{"id": ev.ID})
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.bus.SessionExists(id) && !s.bus.SessionClosed(id) {
		// The bus treats closing an unknown id as a no-op (AgentPool's
		// close_session); over HTTP a typo is worth a 404.
		writeError(w, http.StatusNotFound, "session_not_found", fmt.Sprintf("no session %q", id))
		return
	}
	var err error
	switch c := r.URL.Query().Get("cascade"); c {
	case "", "0", "false":
		err = s.bus.CloseSession(id)
	case "1", "true":
		err = s.bus.CloseSessionTree(id)
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("cascade %q (want 0, 1, true or false)", c))
		return
	}
	if err != nil {
		writeBusError(w, err)
		return
	}
	s.log.Info("session closed", "session", id)
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

// decodeBody reads one JSON object into v; an empty body is allowed when
// emptyOK. It answers the error itself and reports whether to go on.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", mbe.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid_json", "reading body: "+err.Error())
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if emptyOK {
			return true
		}
		writeError(w, http.StatusBadRequest, "invalid_json", "empty body (want a JSON object)")
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json", "trailing data after the JSON object")
		return false
	}
	return true
}

// writeBusError maps a bus error to its status and code.
func writeBusError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal_error"
	switch {
	case errors.Is(err, scope.ErrUnknownParent):
		status, code = http.StatusNotFound, "parent_not_found"
	case errors.Is(err, scope.ErrCycle):
		status, code = http.StatusConflict, "cycle"
	case errors.Is(err, scope.ErrExists):
		status, code = http.StatusConflict, "session_exists"
	case errors.Is(err, eventbus.ErrSessionNotFound):
		status, code = http.StatusNotFound, "session_not_found"
	case errors.Is(err, eventbus.ErrSessionClosed):
		status, code = http.StatusGone, "session_closed"
	case errors.Is(err, eventbus.ErrClosed):
		status, code = http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, eventbus.ErrInvalid):
		status, code = http.StatusBadRequest, "invalid_argument"
	}
	writeError(w, status, code, err.Error())
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// newID returns a random session id such as "s-1f2e3d4c5b6a".
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}
