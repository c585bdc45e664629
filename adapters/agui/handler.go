package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

// DefaultPath is the path a [Handler] serves by default.
const DefaultPath = "/agui"

// Input is the new user message of a RunAgentInput, as a [StartFunc]
// gets it.
type Input struct {
	// Thread is the thread id (the session); Run the run id, which the
	// turn should take as its id (the client matches RUN_STARTED's runId
	// against it).
	Thread, Run string
	// MessageID and Text are the last message's id and its text (a string
	// content, or its text input parts joined).
	MessageID, Text string
	// Body is the RunAgentInput as sent (tools, context, state, …).
	Body json.RawMessage
}

// StartFunc starts the turn that answers in on session in.Thread
// (created for a new thread before it is called; left empty when it
// refuses), with in.Run as its id, and returns the
// turn's id. Its error is answered as the bus's errors are (409
// turn_active, 409 turn_ended for a run id used before, …); it must not
// have published anything then.
type StartFunc func(r *http.Request, in Input) (turn string, err error)

// HandlerOptions configure a [Handler]. Start is required.
type HandlerOptions struct {
	// Path is the route's path; "" means DefaultPath. The handler serves
	// POST {Path} and GET {Path}/{threadId}/stream.
	Path string
	// Start starts the turn answering a run's message.
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

// Handler serves AG-UI from the bus's turns:
//
//	POST {path}                    a RunAgentInput → its last (user) message starts a turn; the run as AG-UI events
//	POST {path} with Last-Event-ID the run that id is in, continued exactly after it (no new turn)
//	GET  {path}/{threadId}/stream  with Last-Event-ID: the same; without: the active run joined —
//	                               RUN_STARTED, MESSAGES_SNAPSHOT of the run so far, then live; 204 when none
//
// Every frame carries an id: "<epoch>-<N>" (or "<epoch>-<N>:<k>" inside
// event N's frames), the cursor to resume after. A refused request writes
// nothing to the bus and is answered with the JSON {"code", "message"} of
// the other routes: 400 invalid_json naming the member, 400
// invalid_session_id (a thread id the bus refuses), 400
// invalid_last_event_id, 403, 409 turn_active or turn_ended, 410, 413. A
// cursor of another epoch joins. Safe for concurrent use; it starts no
// goroutines.
type Handler struct {
	bus    *eventbus.Bus
	o      HandlerOptions
	dec    *codec.Set
	co     *http.CrossOriginProtection
	wt     time.Duration
	bt     time.Duration
	max    int64
	path   string
	byPath string
}

// NewHandler returns a Handler for bus. Errors: a nil bus or Start.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil || o.Start == nil {
		return nil, errors.New("agui: NewHandler needs a bus and HandlerOptions.Start")
	}
	l := turnstream.Resolve(o.Codec, o.CrossOrigin, o.MaxBodyBytes, o.WriteTimeout, o.BodyTimeout)
	h := &Handler{bus: bus, o: o, dec: l.Codec, co: l.CrossOrigin, max: l.MaxBodyBytes, wt: l.WriteTimeout, bt: l.BodyTimeout, path: o.Path}
	if h.path == "" {
		h.path = DefaultPath
	}
	h.path = strings.TrimSuffix(h.path, "/")
	h.byPath = h.path + "/"
	return h, nil
}

// ServeHTTP routes r by its path; another path is 404, another method 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	path := r.URL.EscapedPath()
	var err error
	switch {
	case path == h.path:
		if err = method(r, http.MethodPost); err == nil {
			err = h.post(w, r)
		}
	case strings.HasPrefix(path, h.byPath) && strings.HasSuffix(path, "/stream"):
		thread, uerr := url.PathUnescape(strings.TrimSuffix(path[len(h.byPath):], "/stream"))
		switch {
		case uerr != nil || strings.Contains(path[len(h.byPath):len(path)-len("/stream")], "/"):
			err = notFound(path)
		default:
			if err = method(r, http.MethodGet); err == nil {
				err = h.get(w, r, thread)
			}
		}
	default:
		err = notFound(path)
	}
	if err != nil {
		resume.WriteError(w, err, "")
	}
}

func notFound(path string) error {
	return &resume.StatusError{Status: http.StatusNotFound, Code: resume.CodeNotFound, Message: "no route for " + textutil.Quote(path, 64)}
}

func method(r *http.Request, want string) error {
	if r.Method == want {
		return nil
	}
	return &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
		Message: fmt.Sprintf("method %s not allowed (want %s)", r.Method, want), Header: http.Header{"Allow": {want}}}
}

func (h *Handler) authorize(r *http.Request, thread string) error {
	if h.o.Authorize == nil {
		return nil
	}
	if err := h.o.Authorize(r, thread, scope.Session); err != nil {
		var se *resume.StatusError
		if errors.As(err, &se) {
			return se
		}
		return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
	}
	return nil
}

// inputObjects are the objects of a RunAgentInput that ParseInput
// decodes, with the names it reads: a name in another case is refused,
// not folded.
var inputObjects = []turnstream.Object{
	{Path: "", Names: []string{"threadId", "runId", "messages"}},
	{Path: "messages[]", Names: []string{"id", "role", "content"}},
	{Path: "messages[].content[]", Names: []string{"type", "text"}},
}

// ParseInput reads a RunAgentInput: its thread and run ids and its last
// message, which must be the user's, with a text. A malformed input is a
// 400 invalid_json *resume.StatusError naming the member; a thread id
// the bus refuses, "." or ".." (which no join URL can carry) 400
// invalid_session_id, a run id 400 invalid_turn_id.
func ParseInput(body []byte) (Input, error) {
	var in struct {
		ThreadID *string `json:"threadId"`
		RunID    *string `json:"runId"`
		Messages []struct {
			ID      *string         `json:"id"`
			Role    *string         `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return Input{}, turnstream.BadJSON("the body is not a RunAgentInput {threadId, runId, messages, …}: %s", textutil.PublicMessage(err))
	}
	if in.ThreadID == nil {
		return Input{}, turnstream.BadJSON(`the RunAgentInput has no "threadId"`)
	}
	if err := turnstream.CheckSegment("thread id", *in.ThreadID); err != nil {
		return Input{}, err
	}
	out := Input{Thread: *in.ThreadID, Body: body}
	if in.RunID == nil {
		return Input{}, turnstream.BadJSON(`the RunAgentInput has no "runId"`)
	}
	if err := frame.CheckName("run id", *in.RunID); err != nil {
		return Input{}, &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidTurnID, Message: "invalid argument: " + err.Error()}
	}
	out.Run = *in.RunID
	if len(in.Messages) == 0 {
		return Input{}, turnstream.BadJSON(`"messages" must end with the user's new message`)
	}
	for i, m := range in.Messages {
		if m.ID == nil || m.Role == nil {
			return Input{}, turnstream.BadJSON("messages[%d] is not a message {id, role, …}", i)
		}
	}
	i := len(in.Messages) - 1
	last := in.Messages[i]
	if *last.Role != "user" {
		return Input{}, turnstream.BadJSON("the last message, messages[%d], is the %s's: want the user's new message", i, textutil.Quote(*last.Role, 32))
	}
	var text string
	if json.Unmarshal(last.Content, &text) != nil {
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(last.Content, &parts) != nil {
			return Input{}, turnstream.BadJSON("messages[%d].content must be a string or an array of input parts", i)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" && p.Text != nil {
				b.WriteString(*p.Text)
			}
		}
		text = b.String()
	}
	out.MessageID, out.Text = *last.ID, text
	return out, nil
}

// post serves POST {path}: a new run, or (Last-Event-ID) a resumed one.
func (h *Handler) post(w http.ResponseWriter, r *http.Request) error {
	if err := turnstream.CheckOrigin(h.co, r); err != nil {
		return err
	}
	body, err := turnstream.ReadBody(w, r, h.max, h.bt, inputObjects...)
	if err != nil {
		return err
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		var in struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(body, &in)
		if err := turnstream.CheckSession("thread id", in.ThreadID); err != nil {
			return err
		}
		return h.get(w, r, in.ThreadID)
	}
	in, err := ParseInput(body)
	if err != nil {
		return err
	}
	if err := h.authorize(r, in.Thread); err != nil {
		return err
	}
	if t, ok := h.bus.Turn(in.Thread, ""); ok {
		return &resume.StatusError{Status: http.StatusConflict, Code: resume.CodeTurnActive,
			Message: fmt.Sprintf("thread %s has an active run %s: join it (GET %s/%s/stream)",
				textutil.Quote(in.Thread, 64), textutil.Quote(t.Turn, 64), h.path, url.PathEscape(in.Thread))}
	}
	if err := turnstream.Ensure(h.bus, in.Thread); err != nil {
		return err
	}
	sub, err := turnstream.Subscribe(r.Context(), h.bus, in.Thread, nil)
	if err != nil {
		return resume.StatusFor(err, in.Thread)
	}
	defer sub.Close()
	turn, err := h.o.Start(r, in)
	if err != nil {
		return resume.StatusFor(err, in.Thread)
	}
	enc := NewEncoder(Options{ThreadID: in.Thread, RunID: turn, Epoch: h.bus.Epoch()})
	h.write(w, r, enc, nil, &turnstream.Reader{Sub: sub, Turn: turn})
	return nil
}

// get serves a resume (Last-Event-ID) or a join of thread's run.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, thread string) error {
	if err := turnstream.CheckSession("thread id", thread); err != nil {
		return err
	}
	if err := h.authorize(r, thread); err != nil {
		return err
	}
	last := r.Header.Get("Last-Event-ID")
	c, ok, err := turnstream.ParseCursor(last, h.bus.Epoch())
	if err != nil {
		return err
	}
	ctx := r.Context()
	if ok {
		t, found, err := turnstream.Locate(ctx, h.bus, thread, c.Seq)
		if err != nil {
			return h.gone(w, err, thread)
		}
		if !found || t.EndID != 0 && (c.Seq > t.EndID || c.Seq == t.EndID && !c.Mid) {
			turnstream.NoTurn(w) // the run had ended when the client saw that id
			return nil
		}
		enc := NewEncoder(Options{ThreadID: thread, RunID: t.Turn, Epoch: h.bus.Epoch()})
		tail, err := turnstream.Resume(ctx, h.bus, thread, h.dec, enc, t, c)
		if err != nil {
			return h.gone(w, err, thread)
		}
		defer tail.Close()
		h.write(w, r, enc, enc.Reattach(nil, last, false), &turnstream.Reader{Sub: tail, Turn: t.Turn, Started: true})
		return nil
	}
	t, active := h.bus.Turn(thread, "")
	if !active {
		turnstream.NoTurn(w)
		return nil
	}
	sub, lead, err := turnstream.Open(ctx, h.bus, thread, t)
	if err != nil {
		return h.gone(w, err, thread)
	}
	defer sub.Close()
	enc := NewEncoder(Options{ThreadID: thread, RunID: t.Turn, Epoch: h.bus.Epoch()})
	at, err := turnstream.Prime(ctx, sub, h.dec, enc, 0, lead...)
	if err != nil {
		return h.gone(w, err, thread)
	}
	if enc.Done() { // it ended meanwhile: nothing is active
		turnstream.NoTurn(w)
		return nil
	}
	at = max(at, t.StartID)
	h.write(w, r, enc, enc.Reattach(nil, resume.FormatID(at, h.bus.Epoch()), true), &turnstream.Reader{Sub: sub, Turn: t.Turn, Started: true})
	return nil
}

// gone answers a session that went away (204: no run) or another error.
func (h *Handler) gone(w http.ResponseWriter, err error, thread string) error {
	if errors.Is(err, eventbus.ErrSessionNotFound) || errors.Is(err, eventbus.ErrSessionClosed) {
		turnstream.NoTurn(w)
		return nil
	}
	return resume.StatusFor(err, thread)
}

// write streams the run rd reads through enc, after first.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, enc *Encoder, first []byte, rd *turnstream.Reader) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := turnstream.Writer{W: w, Timeout: h.wt}
	buf := first
	var parts []codec.Part
	for !enc.Done() {
		if err := out.Write(buf); err != nil {
			return
		}
		buf = buf[:0]
		evs, done, err := rd.Next(r.Context())
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return // the client went away; the turn goes on
		case err != nil:
			buf = enc.Finish(buf, 0, codec.ReasonError, fmt.Sprintf("%v: resume with Last-Event-ID", err))
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
