package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// DurationOr is d, or def when d is zero, or 0 (none) when d is negative.
func DurationOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Registry is the set of a handler's open streams, each an S that cancel
// ends. After Close it admits none and cancels those it has; [Registry.Wait]
// returns once the last is removed. Safe for concurrent use.
type Registry[S any] struct {
	cancel func(S)

	mu     sync.Mutex
	closed bool
	next   uint64
	live   map[uint64]S
	idle   chan struct{} // closed when closed and no stream is left
}

// NewRegistry returns an empty Registry whose Close ends a stream with
// cancel.
func NewRegistry[S any](cancel func(S)) *Registry[S] {
	return &Registry[S]{cancel: cancel, live: make(map[uint64]S), idle: make(chan struct{})}
}

// Add registers s and returns its id; false (and no id) once closed.
func (r *Registry[S]) Add(s S) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, false
	}
	r.next++
	r.live[r.next] = s
	return r.next, true
}

// Remove unregisters the stream id, calling last (when non-nil) with it
// under the registry's lock, so that it can fold the stream's counters
// into the handler's while [Registry.Each] cannot see the stream twice or
// not at all.
func (r *Registry[S]) Remove(id uint64, last func(S)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.live[id]; ok && last != nil {
		last(s)
	}
	delete(r.live, id)
	if r.closed && len(r.live) == 0 {
		select {
		case <-r.idle:
		default:
			close(r.idle)
		}
	}
}

// Each calls fn with every open stream under the registry's lock and
// returns how many there are; fn must not call the registry.
func (r *Registry[S]) Each(fn func(S)) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fn != nil {
		for _, s := range r.live {
			fn(s)
		}
	}
	return len(r.live)
}

// Closed reports whether Close was called.
func (r *Registry[S]) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close refuses new streams and cancels the open ones. Idempotent.
func (r *Registry[S]) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	for _, s := range r.live {
		r.cancel(s)
	}
	if len(r.live) == 0 {
		close(r.idle)
	}
}

// Wait returns nil once Close was called and every stream removed, or
// ctx's error when it ends first.
func (r *Registry[S]) Wait(ctx context.Context) error {
	select {
	case <-r.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown is Close followed by Wait: what a handler's Shutdown does.
func (r *Registry[S]) Shutdown(ctx context.Context) error {
	r.Close()
	return r.Wait(ctx)
}

// IsMany reports whether a handler without HandlerOptions.SessionID
// serves r as a many-sessions stream: no {id} path value, and session= in
// the query or a ServeMux pattern (r.Pattern) without {id}, such as
// "GET /events". Under another router r.Pattern is empty: only session=
// counts.
func IsMany(r *http.Request) bool {
	if r.PathValue("id") != "" {
		return false
	}
	if strings.Contains(r.URL.RawQuery, "session=") && r.URL.Query().Has("session") {
		return true
	}
	return r.Pattern != "" && !strings.Contains(r.Pattern, "{id}")
}

// SessionID returns r's session id — fn's, or the {id} path value when
// fn is nil — and a 400 invalid_session_id naming the cause when it is
// empty: under another router (or a mux pattern without {id}) the path
// value is empty whatever the URL says, and the message says to mount on
// a pattern such as pattern or to set HandlerOptions.SessionID. It does
// not check a non-empty id (resume.ParseRequest and the routes do).
func SessionID(r *http.Request, fn resume.SessionIDFunc, pattern string) (string, error) {
	id := ""
	if fn != nil {
		id = fn(r)
	} else {
		id = r.PathValue("id")
	}
	if id != "" {
		return id, nil
	}
	msg := `empty session id: the request has no {id} path value (mount the handler on a ServeMux pattern with {id}, ` +
		`such as "` + pattern + `", or set HandlerOptions.SessionID to read the id from your router)`
	if fn != nil {
		msg = "empty session id: HandlerOptions.SessionID returned an empty id for " + textutil.Quote(r.URL.EscapedPath(), 64)
	}
	return "", &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidSessionID, Message: msg}
}

// Hooks are the options both handlers take for admitting a request (see
// sse.HandlerOptions and ws.HandlerOptions for their meaning).
type Hooks struct {
	SessionID      resume.SessionIDFunc
	Authorize      resume.AuthorizeFunc
	Configure      resume.ConfigureFunc
	Query          resume.QueryRules
	OverflowPolicy eventbus.OverflowPolicy
}

// Check returns the error a handler's constructor gives for a bus and
// hooks it cannot serve with, prefixed with who (such as "sse:
// NewHandler"): a nil bus, or an OverflowPolicy that is not "" or one of
// the bus's policies (eventbus.Options.Validate's *eventbus.OptionError
// naming the value, errors.Is eventbus.ErrInvalid). Found here, it is the
// server's mistake, not a 400 for every client that subscribes.
func (h Hooks) Check(who string, bus *eventbus.Bus) error {
	if bus == nil {
		return errors.New(who + ": nil bus")
	}
	if h.OverflowPolicy == "" {
		return nil
	}
	if err := (eventbus.Options{OverflowPolicy: h.OverflowPolicy}).Validate(); err != nil {
		return fmt.Errorf("%s: HandlerOptions: %w", who, err)
	}
	return nil
}

// Admission is an admitted subscribe request.
type Admission struct {
	Session string
	Options eventbus.SubscribeOptions
	// Message is ?events=message: every frame as a plain message.
	Message bool
}

// Admit runs every check a subscribe request passes before anything is
// subscribed, in this order: the method (405 unless GET), the session id
// (from h.SessionID, else the {id} path wildcard; an empty one is 400
// invalid_session_id naming where it came from), resume.ParseRequest and
// resume.ParseEvents (400 naming the bad value), check (a transport's own,
// such as the WebSocket handshake; nil for none), then the overflow policy
// — h.OverflowPolicy, else the bus's when it was set
// (Bus.OverflowPolicySet), else drop_subscriber: a stream's client resumes
// by itself, so evict rather than drop —, h.Authorize (403 forbidden with the error's text, or the
// *resume.StatusError it is or wraps) and h.Configure. It sets the bus
// epoch header on w first, so that every answer carries it; a refusal is
// returned as a *resume.StatusError, not written.
func Admit(w http.ResponseWriter, r *http.Request, bus *eventbus.Bus, h Hooks, check func() error) (Admission, error) {
	w.Header().Set(resume.HeaderEpoch, bus.Epoch())
	var a Admission
	if r.Method != http.MethodGet {
		return a, &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed (want GET)", r.Method)}
	}
	var err error
	if a.Session, err = SessionID(r, h.SessionID, "GET /session/{id}/events"); a.Session == "" {
		return a, err
	}
	if a.Options, err = resume.ParseRequest(r, a.Session, bus.Epoch(), h.Query); err != nil {
		return a, err
	}
	if a.Message, err = resume.ParseEvents(r.URL.Query().Get("events")); err != nil {
		return a, err
	}
	if check != nil {
		if err := check(); err != nil {
			return a, err
		}
	}
	switch {
	case h.OverflowPolicy != "":
		a.Options.Policy = h.OverflowPolicy
	case !bus.OverflowPolicySet():
		a.Options.Policy = eventbus.DropSubscriber
	}
	if h.Authorize != nil {
		if err := h.Authorize(r, a.Session, a.Options.Scope); err != nil {
			var se *resume.StatusError
			if !errors.As(err, &se) {
				se = &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
			}
			return a, se
		}
	}
	if h.Configure != nil {
		h.Configure(r, &a.Options)
	}
	return a, nil
}
