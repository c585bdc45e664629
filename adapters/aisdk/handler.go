package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

// DefaultAPI is the path a [Handler] serves by default: useChat's and
// DefaultChatTransport's default api.
const DefaultAPI = "/api/chat"

// Message is the new user message of a chat request, as a [StartFunc]
// gets it.
type Message struct {
	// Chat is the chat id (the body's "id"): the session the turn runs on.
	Chat string
	// ID is the user message's id; Trigger the request's trigger
	// ("submit-message" or "regenerate-message").
	ID, Trigger string
	// Text is the text of the message's text parts, joined.
	Text string
	// UIMessage is the message as sent; Body the whole request body (for
	// the fields an application adds to it).
	UIMessage, Body json.RawMessage
}

// StartFunc starts the turn that answers m on session m.Chat (created
// for a new chat id before it is called; left empty when it refuses) — typically eventbus.Bus.StartTurn and a
// producer goroutine that publishes into the turn and ends it — and
// returns the turn's id. It may run the turn on another node of the bus.
// Its error is answered as the bus's errors are (409 turn_active, 400
// invalid_argument, …; a *resume.StatusError as it says); it must not
// have published anything then. It runs on the request's goroutine.
type StartFunc func(r *http.Request, m Message) (turn string, err error)

// HandlerOptions configure a [Handler]. Start is required.
type HandlerOptions struct {
	// API is the chat route's path; "" means DefaultAPI. The handler
	// serves POST {API}, GET {API}/{chatId}/stream and POST
	// {API}/{chatId}/stop.
	API string
	// Start starts the turn answering a chat request's message.
	Start StartFunc
	// Codec decodes the bus's events; nil means codec.Default.
	Codec *codec.Set
	// Authorize, when set, admits or refuses every request (called with
	// scope.Session): 403, or the *resume.StatusError it returns.
	Authorize resume.AuthorizeFunc
	// AuthorizeCancel, when set, admits or refuses a stop.
	AuthorizeCancel resume.AuthorizeCancelFunc
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

// Handler serves the AI SDK's chat routes from the bus's turns:
//
//	POST {api}                  a chat request (DefaultChatTransport's body) → the turn as a UI-message stream
//	GET  {api}/{chatId}/stream  the active turn from its start, compacted, then live; 204 when none
//	POST {api}/{chatId}/stop    cancel the chat's active turn → 202 {"cancelled", "held"}
//
// A refused request is answered before anything is written to the bus,
// with the JSON {"code", "message"} of the other routes (the transport
// throws it as its error's text): 400 invalid_json naming the bad member,
// 400 invalid_session_id, 403, 404 (stop of an unknown chat), 409
// turn_active naming the running turn, 410 session_closed, 413. A stream
// ends with finish, abort (a cancel: the partial message stays) or error
// then finish, and data: [DONE]; a client that goes away leaves the turn
// running. Safe for concurrent use; it starts no goroutines.
type Handler struct {
	bus   *eventbus.Bus
	o     HandlerOptions
	dec   *codec.Set
	co    *http.CrossOriginProtection
	wt    time.Duration
	bt    time.Duration
	max   int64
	api   string
	byAPI string // api + "/"
}

// NewHandler returns a Handler for bus. Errors: a nil bus or Start.
func NewHandler(bus *eventbus.Bus, o HandlerOptions) (*Handler, error) {
	if bus == nil || o.Start == nil {
		return nil, errors.New("aisdk: NewHandler needs a bus and HandlerOptions.Start")
	}
	l := turnstream.Resolve(o.Codec, o.CrossOrigin, o.MaxBodyBytes, o.WriteTimeout, o.BodyTimeout)
	h := &Handler{bus: bus, o: o, dec: l.Codec, co: l.CrossOrigin, max: l.MaxBodyBytes, wt: l.WriteTimeout, bt: l.BodyTimeout, api: o.API}
	if h.api == "" {
		h.api = DefaultAPI
	}
	h.api = strings.TrimSuffix(h.api, "/")
	h.byAPI = h.api + "/"
	return h, nil
}

// ServeHTTP routes r to one of the three routes by its path; another
// path is 404, another method 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	path := r.URL.EscapedPath()
	var err error
	switch {
	case path == h.api:
		err = h.method(r, http.MethodPost)
		if err == nil {
			err = h.post(w, r)
		}
	case strings.HasPrefix(path, h.byAPI):
		chat, action, _ := strings.Cut(path[len(h.byAPI):], "/")
		if c, uerr := url.PathUnescape(chat); uerr == nil {
			chat = c
		} else {
			action = "" // not a path segment: 404
		}
		switch action {
		case "stream":
			if err = h.method(r, http.MethodGet); err == nil {
				err = h.stream(w, r, chat)
			}
		case "stop":
			if err = h.method(r, http.MethodPost); err == nil {
				err = h.stop(w, r, chat)
			}
		default:
			err = &resume.StatusError{Status: http.StatusNotFound, Code: resume.CodeNotFound, Message: "no route for " + textutil.Quote(path, 64)}
		}
	default:
		err = &resume.StatusError{Status: http.StatusNotFound, Code: resume.CodeNotFound, Message: "no route for " + textutil.Quote(path, 64)}
	}
	if err != nil {
		resume.WriteError(w, err, "")
	}
}

func (h *Handler) method(r *http.Request, want string) error {
	if r.Method == want {
		return nil
	}
	return &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
		Message: fmt.Sprintf("method %s not allowed (want %s)", r.Method, want), Header: http.Header{"Allow": {want}}}
}

func (h *Handler) authorize(r *http.Request, chat string) error {
	if h.o.Authorize == nil {
		return nil
	}
	if err := h.o.Authorize(r, chat, scope.Session); err != nil {
		var se *resume.StatusError
		if errors.As(err, &se) {
			return se
		}
		return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
	}
	return nil
}

// chatObjects are the objects of a chat request that ParseRequest decodes,
// with the names it reads: a name in another case is refused, not folded.
var chatObjects = []turnstream.Object{
	{Path: "", Names: []string{"id", "messages", "trigger", "messageId"}},
	{Path: "messages[]", Names: []string{"id", "role", "parts"}},
	{Path: "messages[].parts[]", Names: []string{"type", "text"}},
}

// chatRequest is the body DefaultChatTransport sends.
type chatRequest struct {
	ID        *string           `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   *string           `json:"trigger"`
	MessageID *string           `json:"messageId"`
}

type uiMessage struct {
	ID    *string           `json:"id"`
	Role  *string           `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

// ParseRequest reads a chat request body: its chat id, trigger and last
// message, which must be the user's. A malformed body is a 400
// invalid_json *resume.StatusError naming the member (messages[2].parts,
// …); a chat id the bus refuses, "." or ".." (which no resume URL can
// carry) 400 invalid_session_id.
func ParseRequest(body []byte) (Message, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Message{}, turnstream.BadJSON("the body is not a chat request {id, messages, trigger}: %s", textutil.PublicMessage(err))
	}
	if req.ID == nil {
		return Message{}, turnstream.BadJSON(`the body has no "id" (the chat id)`)
	}
	if err := turnstream.CheckSegment("chat id", *req.ID); err != nil {
		return Message{}, err
	}
	m := Message{Chat: *req.ID, Body: body}
	if req.Trigger == nil || *req.Trigger != "submit-message" && *req.Trigger != "regenerate-message" {
		got := "none"
		if req.Trigger != nil {
			got = textutil.Quote(*req.Trigger, 48)
		}
		return Message{}, turnstream.BadJSON(`"trigger" must be "submit-message" or "regenerate-message", got %s`, got)
	}
	m.Trigger = *req.Trigger
	if len(req.Messages) == 0 {
		return Message{}, turnstream.BadJSON(`"messages" must be a non-empty array of UI messages`)
	}
	for i, raw := range req.Messages {
		var um uiMessage
		if err := json.Unmarshal(raw, &um); err != nil {
			return Message{}, turnstream.BadJSON("messages[%d] is not a UI message {id, role, parts}: %s", i, textutil.PublicMessage(err))
		}
		switch {
		case um.ID == nil:
			return Message{}, turnstream.BadJSON("messages[%d] has no id", i)
		case um.Role == nil || *um.Role != "user" && *um.Role != "assistant" && *um.Role != "system":
			return Message{}, turnstream.BadJSON(`messages[%d].role must be "user", "assistant" or "system"`, i)
		case um.Parts == nil:
			return Message{}, turnstream.BadJSON("messages[%d].parts must be an array", i)
		}
		var text strings.Builder
		for j, p := range um.Parts {
			var part struct {
				Type *string `json:"type"`
				Text *string `json:"text"`
			}
			if json.Unmarshal(p, &part) != nil || part.Type == nil {
				return Message{}, turnstream.BadJSON("messages[%d].parts[%d] is not a part {type, …}", i, j)
			}
			if *part.Type == "text" {
				if part.Text == nil {
					return Message{}, turnstream.BadJSON("messages[%d].parts[%d] is a text part without text", i, j)
				}
				text.WriteString(*part.Text)
			}
		}
		if i == len(req.Messages)-1 {
			if *um.Role != "user" {
				return Message{}, turnstream.BadJSON("the last message, messages[%d], is the %s's: want the user's new message", i, *um.Role)
			}
			m.ID, m.Text, m.UIMessage = *um.ID, text.String(), raw
		}
	}
	return m, nil
}

// post serves POST {api}: checks, the session, the turn, the stream.
func (h *Handler) post(w http.ResponseWriter, r *http.Request) error {
	if err := turnstream.CheckOrigin(h.co, r); err != nil {
		return err
	}
	body, err := turnstream.ReadBody(w, r, h.max, h.bt, chatObjects...)
	if err != nil {
		return err
	}
	m, err := ParseRequest(body)
	if err != nil {
		return err
	}
	if err := h.authorize(r, m.Chat); err != nil {
		return err
	}
	if t, ok := h.bus.Turn(m.Chat, ""); ok {
		return &resume.StatusError{Status: http.StatusConflict, Code: resume.CodeTurnActive,
			Message: fmt.Sprintf("chat %s has an active turn %s: stop it or resume it (GET %s/%s/stream)",
				textutil.Quote(m.Chat, 64), textutil.Quote(t.Turn, 64), h.api, url.PathEscape(m.Chat))}
	}
	if err := turnstream.Ensure(h.bus, m.Chat); err != nil {
		return err
	}
	sub, err := turnstream.Subscribe(r.Context(), h.bus, m.Chat, nil)
	if err != nil {
		return resume.StatusFor(err, m.Chat)
	}
	defer sub.Close()
	turn, err := h.o.Start(r, m)
	if err != nil {
		return resume.StatusFor(err, m.Chat)
	}
	h.write(w, r, &turnstream.Reader{Sub: sub, Turn: turn}, turn)
	return nil
}

// stream serves GET {api}/{chatId}/stream.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, chat string) error {
	if err := turnstream.CheckSession("chat id", chat); err != nil {
		return err
	}
	if err := h.authorize(r, chat); err != nil {
		return err
	}
	t, ok := h.bus.Turn(chat, "")
	if !ok {
		turnstream.NoTurn(w)
		return nil
	}
	sub, lead, err := turnstream.Open(r.Context(), h.bus, chat, t)
	if err != nil {
		if errors.Is(err, eventbus.ErrSessionNotFound) || errors.Is(err, eventbus.ErrSessionClosed) {
			turnstream.NoTurn(w)
			return nil
		}
		return resume.StatusFor(err, chat)
	}
	defer sub.Close()
	h.write(w, r, &turnstream.Reader{Sub: sub, Turn: t.Turn, Started: true, Lead: lead}, t.Turn)
	return nil
}

// write streams the turn rd reads as the message named after turn.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, rd *turnstream.Reader, turn string) {
	SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	out := turnstream.Writer{W: w, Timeout: h.wt}
	enc := NewEncoder(turn)
	buf := enc.Start(nil)
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
			buf = enc.Finish(buf, codec.ReasonError, fmt.Sprintf("%v: resume with GET %s/{chatId}/stream", err, h.api))
		case done: // the turn ended without a turn_end the codec knows
			buf = enc.Finish(buf, codec.ReasonComplete, "")
		}
		for _, ev := range evs {
			parts = h.dec.Decode(parts[:0], ev)
			buf = enc.Append(buf, parts...)
		}
	}
	_ = out.Write(buf)
}

// stop serves POST {api}/{chatId}/stop: a cancel of the chat's turns
// (body: none, or {"turn"?, "cascade"?}).
func (h *Handler) stop(w http.ResponseWriter, r *http.Request, chat string) error {
	if err := turnstream.CheckOrigin(h.co, r); err != nil {
		return err
	}
	if err := turnstream.CheckSession("chat id", chat); err != nil {
		return err
	}
	if err := h.authorize(r, chat); err != nil {
		return err
	}
	body, err := turnstream.ReadBodyOrEmpty(w, r, h.max, h.bt, turnstream.Object{Names: []string{"turn", "cascade"}})
	if err != nil {
		return err
	}
	c, err := resume.ParseCancel(body)
	if err != nil {
		return err
	}
	res, err := serve.Cancel(r.Context(), h.bus, r, chat, c, "", h.o.AuthorizeCancel)
	if err != nil {
		return err
	}
	b, _ := textutil.MarshalJSON(res)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
