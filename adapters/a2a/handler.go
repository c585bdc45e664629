package a2a

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

// DefaultPath is the JSON-RPC endpoint a [Handler] serves by default;
// CardPath is where A2A clients look for the agent card.
const (
	DefaultPath = "/a2a"
	CardPath    = "/.well-known/agent-card.json"
)

// Message is the message of a streaming request, as a [StartFunc] gets
// it.
type Message struct {
	// Context is the context id (the session: the request's, or a new one
	// "ctx_" and 16 hex digits when it sent none); Turn the id the turn
	// should take (generated: "task_" and 16 hex digits).
	Context, Turn string
	// Request is the parsed request (its id, version, message id, text).
	Request Request
}

// StartFunc starts the turn that answers m on session m.Context
// (created for a new context before it is called; left empty when it
// refuses), with m.Turn as its id, and returns the turn's id (any id the
// bus accepts; [TaskID] makes the task's). Its error is answered as the
// bus's errors are; it must not have published anything then.
type StartFunc func(r *http.Request, m Message) (turn string, err error)

// HandlerOptions configure a [Handler]. Start is required.
type HandlerOptions struct {
	// Path is the JSON-RPC endpoint's path; "" means DefaultPath.
	Path string
	// Start starts the turn answering a message.
	Start StartFunc
	// Codec decodes the bus's events; nil means codec.Default.
	Codec *codec.Set
	// Authorize, when set, admits or refuses every request (called with
	// scope.Session): 403, or the *resume.StatusError it returns.
	Authorize resume.AuthorizeFunc
	// CrossOrigin refuses a POST that a browser page of another origin
	// sends (403 forbidden_origin); nil means same origin only.
	CrossOrigin *http.CrossOriginProtection
	// MaxBodyBytes bounds a request body; 0 means 4 MiB.
	MaxBodyBytes int64
	// WriteTimeout bounds each write of a stream; 0 means 30 s, negative
	// none.
	WriteTimeout time.Duration
	// BodyTimeout bounds how long a request body may take to arrive (a
	// read deadline on the connection, cleared after the body): 408
	// request_timeout past it, the connection closed. 0 means 10 s,
	// negative none (the server's own deadlines then bound it, if any).
	BodyTimeout time.Duration
}

// Handler serves A2A's streaming JSON-RPC methods from the bus's turns
// at POST {path}, in protocol 1.0 and 0.3:
//
//	SendStreamingMessage, message/stream  the message's text starts a turn (a task) → the task (submitted),
//	                                      then its status and artifact updates, until it is terminal
//	SubscribeToTask, tasks/resubscribe    the task as it stands first (status, every artifact so far,
//	                                      text merged), then live updates, until it is terminal;
//	                                      with Last-Event-ID: exactly the updates after that frame
//
// A task id is "<turn>@<context>" ([TaskID]): a resubscribe on any node
// finds its session. A refused request writes nothing to the bus and is answered
// with a JSON-RPC error response under the HTTP status of the other
// routes: 400 (CodeParseError, CodeInvalidRequest, CodeInvalidParams
// naming the value), 404 (CodeMethodNotFound; CodeTaskNotFound), 409
// (CodeInvalidRequest: a turn is active in the context), 410, 413.
// Safe for concurrent use; it starts no goroutines.
type Handler struct {
	bus *eventbus.Bus
	o   HandlerOptions
	dec *codec.Set
	co  *http.CrossOriginProtection
	wt  time.Duration
	bt  time.Duration
	max int64
}

// NewHandler returns a Handler for bus. Errors: a nil bus or Start.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil || o.Start == nil {
		return nil, errors.New("a2a: NewHandler needs a bus and HandlerOptions.Start")
	}
	l := turnstream.Resolve(o.Codec, o.CrossOrigin, o.MaxBodyBytes, o.WriteTimeout, o.BodyTimeout)
	h := &Handler{bus: bus, o: o, dec: l.Codec, co: l.CrossOrigin, max: l.MaxBodyBytes, wt: l.WriteTimeout, bt: l.BodyTimeout}
	return h, nil
}

// TaskID returns the task id of turn in session: "<turn>@<session>". A
// turn id holding '@' is written "@<turn>@<session>" with the turn's '%'
// as "%25" and '@' as "%40" (a plain id never starts with '@'), so every
// pair of a session and a turn id has one task id that splits back into
// it, and the session is what follows the first '@' after the turn.
func TaskID(session, turn string) string {
	if !strings.Contains(turn, "@") {
		return turn + "@" + session
	}
	return "@" + turnEscaper.Replace(turn) + "@" + session
}

var turnEscaper = strings.NewReplacer("%", "%25", "@", "%40")

// splitTask splits a task id into its session and turn; ok is false for
// an id TaskID does not write.
func splitTask(id string) (session, turn string, ok bool) {
	esc, escaped := strings.CutPrefix(id, "@")
	if !escaped {
		turn, session, ok = strings.Cut(id, "@")
		return session, turn, ok && turn != "" && session != ""
	}
	esc, session, ok = strings.Cut(esc, "@")
	if !ok || session == "" {
		return "", "", false
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		if c == '%' {
			switch {
			case strings.HasPrefix(esc[i:], "%25"):
				c = '%'
			case strings.HasPrefix(esc[i:], "%40"):
				c = '@'
			default:
				return "", "", false
			}
			i += 2
		}
		b.WriteByte(c)
	}
	turn = b.String()
	// Only a turn holding '@' is written escaped: one id per task.
	return session, turn, strings.Contains(turn, "@")
}

// ServeHTTP serves one JSON-RPC request (POST only: 405 otherwise).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	var req Request
	err := h.serve(w, r, &req)
	if err == nil {
		return
	}
	status, rpc := http.StatusBadRequest, &Error{CodeInvalidRequest, ""}
	var e *Error
	var se *resume.StatusError
	switch {
	case errors.As(err, &e):
		rpc = e
		if e.Code == CodeMethodNotFound || e.Code == CodeTaskNotFound {
			status = http.StatusNotFound
		}
	case errors.As(resume.StatusFor(err, req.ContextID), &se):
		status, rpc.Message = se.Status, clip(se.Message)
		switch {
		case se.Status == http.StatusBadRequest || se.Status == http.StatusRequestEntityTooLarge:
			rpc.Code = CodeInvalidParams
		case se.Code == resume.CodeRingEvicted:
			// The task's first updates have left the replay buffer: this
			// server cannot give the task whole (it exists; it is not lost).
			rpc.Code = CodeUnsupportedOp
		case se.Status == http.StatusNotFound || se.Status == http.StatusGone:
			rpc.Code = CodeTaskNotFound
		case se.Status >= 500:
			rpc.Code = CodeInternalError
		}
		for k, v := range se.Header {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(AppendError(nil, req.ID, rpc))
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, req *Request) error {
	if r.Method != http.MethodPost {
		return &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed (want POST)", r.Method), Header: http.Header{"Allow": {"POST"}}}
	}
	if err := turnstream.CheckOrigin(h.co, r); err != nil {
		return err
	}
	body, err := turnstream.ReadBodyOrEmpty(w, r, h.max, h.bt, requestObjects...)
	if err != nil {
		return err
	}
	if *req, err = ParseRequest(body); err != nil {
		return err
	}
	if req.Subscribe {
		return h.subscribe(w, r, *req)
	}
	return h.stream(w, r, *req)
}

func (h *Handler) authorize(r *http.Request, session string) error {
	if h.o.Authorize == nil {
		return nil
	}
	if err := h.o.Authorize(r, session, scope.Session); err != nil {
		var se *resume.StatusError
		if errors.As(err, &se) {
			return se
		}
		return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
	}
	return nil
}

func newID(prefix string) string {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	return prefix + hex.EncodeToString(raw[:])
}

// requestObjects are the objects of a JSON-RPC request that ParseRequest
// decodes, with the names it reads: a name in another case is refused,
// not folded.
var requestObjects = []turnstream.Object{
	{Path: "", Names: []string{"jsonrpc", "id", "method", "params"}},
	{Path: "params", Names: []string{"id", "message"}},
	{Path: "params.message", Names: []string{"messageId", "contextId", "taskId", "parts"}},
	{Path: "params.message.parts[]", Names: []string{"kind", "text"}},
}

// stream serves SendStreamingMessage / message/stream.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, req Request) error {
	session := req.ContextID
	if session == "" {
		session = newID("ctx_")
		req.ContextID = session
	}
	if err := turnstream.CheckSession("contextId", session); err != nil {
		return err // 400: answered as invalid params with its message
	}
	if strings.TrimSpace(req.Text) == "" {
		return &Error{CodeInvalidParams, "the message has no text part"}
	}
	if err := h.authorize(r, session); err != nil {
		return err
	}
	if t, ok := h.bus.Turn(session, ""); ok {
		return &resume.StatusError{Status: http.StatusConflict, Code: resume.CodeTurnActive,
			Message: fmt.Sprintf("context %s has an active task %s: subscribe to it", textutil.Quote(session, 64), textutil.Quote(TaskID(session, t.Turn), 96))}
	}
	if err := turnstream.Ensure(h.bus, session); err != nil {
		return err
	}
	sub, err := turnstream.Subscribe(r.Context(), h.bus, session, nil)
	if err != nil {
		return err
	}
	defer sub.Close()
	turn, err := h.o.Start(r, Message{Context: session, Turn: newID("task_"), Request: req})
	if err != nil {
		return err
	}
	enc := NewEncoder(Options{Version: req.Version, RequestID: req.ID, TaskID: TaskID(session, turn), ContextID: session, Epoch: h.bus.Epoch()})
	h.write(w, r, enc, enc.Task(nil, 0), &turnstream.Reader{Sub: sub, Turn: turn})
	return nil
}

// subscribe serves SubscribeToTask / tasks/resubscribe.
func (h *Handler) subscribe(w http.ResponseWriter, r *http.Request, req Request) error {
	session, turn, ok := splitTask(req.TaskID)
	if !ok || turnstream.CheckSession("contextId", session) != nil {
		return &Error{CodeTaskNotFound, fmt.Sprintf("task %s not found (a task id here is <turn>@<contextId>)", quote(req.TaskID))}
	}
	req.ContextID = session
	if err := h.authorize(r, session); err != nil {
		return err
	}
	t, known := h.bus.Turn(session, turn)
	if !known {
		return &Error{CodeTaskNotFound, fmt.Sprintf("task %s not found", quote(req.TaskID))}
	}
	enc := NewEncoder(Options{Version: req.Version, RequestID: req.ID, TaskID: req.TaskID, ContextID: session, Epoch: h.bus.Epoch()})
	ctx := r.Context()
	last := r.Header.Get("Last-Event-ID")
	c, resumed, err := turnstream.ParseCursor(last, h.bus.Epoch())
	if err != nil {
		return err // 400: the handler answers its message as invalid params
	}
	if resumed && c.Seq >= t.StartID {
		if t.EndID != 0 && (c.Seq > t.EndID || c.Seq == t.EndID && !c.Mid) {
			h.write(w, r, enc, nil, nil) // nothing after it: an empty stream
			return nil
		}
		tail, err := turnstream.Resume(ctx, h.bus, session, h.dec, enc, t, c)
		if err != nil {
			return err
		}
		defer tail.Close()
		h.write(w, r, enc, enc.Append(nil), &turnstream.Reader{Sub: tail, Turn: turn, Started: true})
		return nil
	}
	sub, lead, err := turnstream.Open(ctx, h.bus, session, t)
	if err != nil {
		return err
	}
	defer sub.Close()
	at, err := turnstream.Prime(ctx, sub, h.dec, enc, 0, lead...)
	if err != nil {
		return err
	}
	task := enc.Task(nil, max(at, t.StartID))
	if enc.Done() {
		h.write(w, r, enc, task, nil)
		return nil
	}
	h.write(w, r, enc, task, &turnstream.Reader{Sub: sub, Turn: turn, Started: true})
	return nil
}

// write streams the task rd reads through enc, after first; a nil rd
// writes first alone.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, enc *Encoder, first []byte, rd *turnstream.Reader) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := turnstream.Writer{W: w, Timeout: h.wt}
	buf := first
	var parts []codec.Part
	for rd != nil && !enc.Done() {
		if err := out.Write(buf); err != nil {
			return
		}
		buf = buf[:0]
		evs, done, err := rd.Next(r.Context())
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return // the client went away; the task goes on
		case err != nil:
			buf = enc.Finish(buf, 0, codec.ReasonError, fmt.Sprintf("%v: subscribe to the task again", err))
		case done:
			buf = enc.Finish(buf, 0, codec.ReasonComplete, "")
		}
		for _, ev := range evs {
			parts = h.dec.Decode(parts[:0], ev)
			buf = enc.Append(buf, parts...)
		}
	}
	_ = out.Write(buf)
}

// CardHandler serves c as the agent card (GET, at CardPath): a URL
// that starts with "/" is made absolute with the request's host
// (X-Forwarded-Proto https, or TLS, gives https).
func CardHandler(c Card) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		card := c
		if strings.HasPrefix(card.URL, "/") {
			scheme := "http"
			if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
				scheme = "https"
			}
			card.URL = scheme + "://" + r.Host + card.URL
		}
		b, err := json.Marshal(card)
		if err != nil {
			resume.WriteError(w, err, "")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
}
