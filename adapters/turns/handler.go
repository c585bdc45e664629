package turns

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

// The Go 1.22+ http.ServeMux patterns of the three routes, beside
// sse.Pattern and ws.Pattern: mux.Handle(turns.CancelPattern, h.Cancel()).
const (
	CancelPattern   = "POST /session/{id}/cancel"
	TurnPattern     = "GET /session/{id}/turn"
	PresencePattern = "GET /session/{id}/presence"
)

// Bounds of a cancel's body.
const (
	// MaxBodyBytes is the largest cancel body read; a longer one is 413.
	MaxBodyBytes = 4096
	// DefaultBodyTimeout bounds how long a cancel's body may take to
	// arrive, from when the handler starts reading it.
	DefaultBodyTimeout = 10 * time.Second
)

// HandlerOptions configure a [Handler]. The zero value is valid: PathValue
// session ids, everyone may read and cancel, same-origin browser pages
// only, epoch-qualified cursors, a 10 s body bound.
type HandlerOptions struct {
	// SessionID extracts the session id from a request; nil means
	// r.PathValue("id"), for the patterns above. See [resume.SessionIDFunc].
	SessionID resume.SessionIDFunc
	// Authorize, when set, admits or refuses the reads (GET turn and
	// presence), called with scope.Session: the hook of the stream
	// handlers, so that whoever may watch a session may ask about it. 403,
	// or the [*resume.StatusError] its error is or wraps.
	Authorize resume.AuthorizeFunc
	// AuthorizeCancel, when set, admits or refuses a cancel (and may set
	// who asked); see [resume.AuthorizeCancelFunc]. Nil: every client
	// that reaches the route may cancel.
	AuthorizeCancel resume.AuthorizeCancelFunc
	// CrossOrigin refuses a cancel that a browser page of another origin
	// sends (403 forbidden_origin), by Sec-Fetch-Site or Origin; a client
	// that is not a browser sends neither and passes. Nil means
	// http.NewCrossOriginProtection(): same origin only (AddTrustedOrigin
	// on one of your own to allow a page elsewhere).
	CrossOrigin *http.CrossOriginProtection
	// BodyTimeout bounds how long a cancel's body may take to arrive (a
	// read deadline on the connection, cleared after the read): 408
	// request_timeout past it. Zero means DefaultBodyTimeout; negative
	// sets none.
	BodyTimeout time.Duration
	// PlainIDs writes GET turn's cursor as a plain "<seq>", as
	// sse.HandlerOptions.PlainIDs does the stream's ids; false (the
	// default) "<epoch>-<seq>".
	PlainIDs bool
	// Logger receives an info record per cancel applied (session, turn,
	// cascade, by, cancelled, held). Nil: no logging.
	Logger *slog.Logger
}

// Handler serves the turn routes of a session: POST /session/{id}/cancel
// ([Handler.Cancel]), GET /session/{id}/turn ([Handler.Turn]) and GET
// /session/{id}/presence ([Handler.Presence]), with the stream handlers'
// session ids, hooks and JSON error answers (docs/protocol.md, "Turn
// routes"). It starts no goroutines and holds nothing per request; safe
// for concurrent use.
type Handler struct {
	bus   *eventbus.Bus
	o     HandlerOptions
	co    *http.CrossOriginProtection
	bodyT time.Duration
	epoch string // the cursor's epoch; "" with PlainIDs

	cancel, turn, presence http.Handler

	cancels, reads, rejected atomic.Uint64
}

// NewHandler returns a Handler serving bus; it fails when bus is nil.
// Options are read once; see [HandlerOptions] for the defaults.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if err := (serve.Hooks{}).Check("turns: NewHandler", bus); err != nil {
		return nil, err
	}
	h := &Handler{bus: bus, o: o, co: o.CrossOrigin, bodyT: serve.DurationOr(o.BodyTimeout, DefaultBodyTimeout)}
	if h.co == nil {
		h.co = http.NewCrossOriginProtection()
	}
	if !o.PlainIDs {
		h.epoch = bus.Epoch()
	}
	h.cancel = h.route(http.MethodPost, h.serveCancel)
	h.turn = h.route(http.MethodGet, h.serveTurn)
	h.presence = h.route(http.MethodGet, h.servePresence)
	return h, nil
}

// Cancel returns the handler of POST /session/{id}/cancel ([CancelPattern]):
// a body {"turn"?, "cascade"?} (or none: every active turn of the session)
// → 202 {"cancelled": [...], "held": [...]} ([eventbus.CancelResult]);
// 400 invalid_json or invalid_turn_id naming the value, 403 (the hook, or
// forbidden_origin), 404 session_not_found, 408, 409 turn_ended naming the
// turn, 410 session_closed, 413, 415, 503. Nothing is written to the log
// unless it answers 202.
func (h *Handler) Cancel() http.Handler { return h.cancel }

// Turn returns the handler of GET /session/{id}/turn ([TurnPattern]): 200
// {"turn", "session", "status", "startId", "cursor", "epoch"} while the
// session has an active turn — cursor is the Last-Event-ID from which a
// stream reads the turn from its start — and 204 when it has none; 404
// session_not_found, 410 session_closed.
func (h *Handler) Turn() http.Handler { return h.turn }

// Presence returns the handler of GET /session/{id}/presence
// ([PresencePattern]): 200 {"session", "clients", "status", "turn"?}
// ([frame.PresenceData]); 404 session_not_found, 410 session_closed.
func (h *Handler) Presence() http.Handler { return h.presence }

// Stats are a Handler's counters, totals since it was made; the JSON
// names are lowerCamel, as the other handlers'.
type Stats struct {
	Cancels  uint64 `json:"cancels"`  // cancels applied (202)
	Reads    uint64 `json:"reads"`    // turn and presence answers (200, 204)
	Rejected uint64 `json:"rejected"` // requests answered with an error status
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	return Stats{Cancels: h.cancels.Load(), Reads: h.reads.Load(), Rejected: h.rejected.Load()}
}

// route wraps serve, the route of one method: the epoch header on every
// answer, 405 for another method (under a router that does not check
// it), the session id (400 naming it), then serve.
func (h *Handler) route(method string, serveFn func(w http.ResponseWriter, r *http.Request, session string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
		session := ""
		err := h.checkMethod(r, method)
		if err == nil {
			session, err = h.sessionID(r)
		}
		if err == nil {
			err = serveFn(w, r, session)
		}
		if err != nil {
			h.rejected.Add(1)
			resume.WriteError(w, err, session)
		}
	})
}

func (h *Handler) checkMethod(r *http.Request, method string) error {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return nil
	}
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	return &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
		Message: fmt.Sprintf("method %s not allowed (want %s)", r.Method, allow), Header: http.Header{"Allow": {allow}}}
}

// sessionID returns the request's session id, or the 400 that names why
// it is not one (an empty one: where it should have come from).
func (h *Handler) sessionID(r *http.Request) (string, error) {
	id, err := serve.SessionID(r, h.o.SessionID, CancelPattern)
	if err != nil {
		return "", err
	}
	if err := frame.CheckName("session id", id); err != nil {
		return "", &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidSessionID, Message: "invalid argument: " + err.Error()}
	}
	return id, nil
}

// authorize runs the read hook (scope.Session).
func (h *Handler) authorize(r *http.Request, session string) error {
	if h.o.Authorize == nil {
		return nil
	}
	if err := h.o.Authorize(r, session, scope.Session); err != nil {
		return forbidden(err)
	}
	return nil
}

// forbidden is a hook's refusal as an answer: its own *resume.StatusError,
// else 403 forbidden with its text.
func forbidden(err error) error {
	var se *resume.StatusError
	if errors.As(err, &se) {
		return se
	}
	return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
}

func (h *Handler) serveCancel(w http.ResponseWriter, r *http.Request, session string) error {
	if err := h.co.Check(r); err != nil {
		return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbiddenOrigin,
			Message: "cross-origin request refused: " + textutil.PublicMessage(err)}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	c, err := resume.ParseCancel(body)
	if err != nil {
		return err
	}
	res, err := serve.Cancel(r.Context(), h.bus, r, session, c, "", h.o.AuthorizeCancel)
	if err != nil {
		return err
	}
	h.cancels.Add(1)
	if h.o.Logger != nil {
		h.o.Logger.LogAttrs(r.Context(), slog.LevelInfo, "turns: cancel", slog.String("session", session),
			slog.String("turn", c.Turn), slog.Bool("cascade", c.Cascade), slog.String("remote", r.RemoteAddr),
			slog.Any("cancelled", res.Cancelled), slog.Any("held", res.Held))
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

// turnAnswer is the answer of GET /session/{id}/turn.
type turnAnswer struct {
	Turn    string `json:"turn"`
	Session string `json:"session"`
	Status  string `json:"status"`
	StartID uint64 `json:"startId"`
	Cursor  string `json:"cursor"`
	Epoch   string `json:"epoch"`
}

// presenceOf is the session's presence for a read route: the read hook,
// then [eventbus.Bus.Presence] (404, 410).
func (h *Handler) presenceOf(r *http.Request, session string) (frame.PresenceData, error) {
	if err := h.authorize(r, session); err != nil {
		return frame.PresenceData{}, err
	}
	p, err := h.bus.Presence(session)
	if err != nil {
		return frame.PresenceData{}, resume.StatusFor(err, session)
	}
	h.reads.Add(1)
	return p, nil
}

func (h *Handler) serveTurn(w http.ResponseWriter, r *http.Request, session string) error {
	p, err := h.presenceOf(r, session) // it answers for the session, and has its status
	if err != nil {
		return err
	}
	t, ok := h.bus.Turn(session, "")
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, turnAnswer{Turn: t.Turn, Session: session, Status: p.Status, StartID: t.StartID,
		Cursor: resume.FormatID(t.StartID-1, h.epoch), Epoch: h.bus.Epoch()})
	return nil
}

func (h *Handler) servePresence(w http.ResponseWriter, r *http.Request, session string) error {
	p, err := h.presenceOf(r, session)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// writeJSON writes v as the answer, with the headers of the error answers.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := textutil.MarshalJSON(v)
	if err != nil {
		resume.WriteError(w, err, "")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
