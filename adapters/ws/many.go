package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/jsonmember"
)

// ManyPattern is the pattern of the many-sessions socket (docs/protocol.md,
// "Many sessions on one connection"): mux.Handle(ws.ManyPattern, h). The
// set changes with the subscribe and unsubscribe messages.
const ManyPattern = "GET /ws"

// manyMsg is a client message of a many-sessions socket.
type manyMsg struct {
	Type    string           `json:"type"`
	Session *string          `json:"session"`
	Scope   string           `json:"scope"`
	From    string           `json:"from"`
	Resume  *json.RawMessage `json:"resume"`
	Ping    json.RawMessage  `json:"ping"`
}

// parseManyMsg reads one message strictly: resume, ping, subscribe or
// unsubscribe; anything else is a *MessageError.
func parseManyMsg(b []byte) (manyMsg, error) {
	var m manyMsg
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		if err == nil {
			err = errors.New("data after the object")
		}
		return m, msgErr("%s", err.Error())
	}
	if err := exactNames(b, "type", "session", "scope", "from", "resume", "ping"); err != nil {
		return m, err
	}
	switch {
	case m.Type == "subscribe" || m.Type == "unsubscribe":
		if m.Session == nil || m.Resume != nil || m.Ping != nil {
			return m, msgErr("%s wants \"session\" and nothing but \"scope\" and \"from\"", m.Type)
		}
		if m.Type == "unsubscribe" && (m.Scope != "" || m.From != "") {
			return m, msgErr("unsubscribe takes only \"session\"")
		}
	case m.Type == "cancel":
		return m, msgErr("cancel is not available on a many-sessions socket (use POST /session/{id}/cancel)")
	case m.Type != "":
		return m, msgErr("unknown message type %s (want subscribe or unsubscribe)", quoteCut(m.Type))
	case m.Resume == nil && m.Ping == nil:
		return m, msgErr("want resume, ping, subscribe or unsubscribe")
	}
	return m, nil
}

// exactNames refuses what encoding/json takes silently in the object b,
// which has decoded: a member given twice (the last won) or named in
// another case than one of names (it was folded onto that name). The
// error is a *MessageError naming the member.
func exactNames(b []byte, names ...string) error {
	f, ok := jsonmember.Find(b, []jsonmember.Object{{Names: names}})
	switch {
	case !ok:
		return nil
	case f.Lone:
		return msgErr("member %s (names are case-sensitive: want %q)", quoteCut(f.Name), f.First)
	case f.Name != f.First:
		return msgErr("member %s given twice (as %q: names are matched regardless of case)", quoteCut(f.Name), f.First)
	}
	return msgErr("member %s given twice", quoteCut(f.Name))
}

// manyResume reads a resume message's cursor: {"lastEventId": "<cursor>",
// "epoch"?: "…"}, {} or null.
func manyResume(raw json.RawMessage) (*resume.ConnCursor, string, error) {
	if raw == nil || string(raw) == "null" {
		return nil, "", nil
	}
	var r struct {
		LastEventID json.RawMessage `json:"lastEventId"`
		Epoch       string          `json:"epoch"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, "", msgErr("resume: %s", err.Error())
	}
	if err := exactNames(raw, "lastEventId", "epoch"); err != nil {
		return nil, "", msgErr("resume: %s", err.(*MessageError).Reason)
	}
	if r.LastEventID == nil {
		return nil, r.Epoch, nil
	}
	s, err := cursorText(r.LastEventID)
	if err != nil {
		return nil, "", err
	}
	c, err := resume.ParseConnCursor(s)
	if err != nil {
		return nil, "", msgErr("resume: %s", err.Error())
	}
	return c, r.Epoch, nil
}

// serveMany serves GET {ws}?session=…: the set's frames in id order, each
// event's message carrying the connection cursor.
func (h *Handler) serveMany(w http.ResponseWriter, r *http.Request, maxSessions int) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	req, err := resume.ParseManyRequest(r, h.bus.Epoch(), h.o.Query, maxSessions)
	if err == nil {
		err = checkHandshake(w, r, h.accept)
	}
	if err != nil {
		h.reject(w, err, "")
		return
	}
	switch {
	case h.o.OverflowPolicy != "":
		req.Options.Policy = h.o.OverflowPolicy
	case !h.bus.OverflowPolicySet():
		req.Options.Policy = eventbus.DropSubscriber
	}
	authorize := func(s resume.SessionScope) error {
		if h.o.Authorize == nil {
			return nil
		}
		if err := h.o.Authorize(r, s.Session, s.Scope); err != nil {
			var se *resume.StatusError
			if !errors.As(err, &se) {
				se = &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
			}
			return se
		}
		return nil
	}
	set := req.Sessions
	if req.Cursor != nil {
		set = req.Cursor.Set(req.Sessions)
	}
	for _, s := range set {
		if err := authorize(s); err != nil {
			h.reject(w, err, s.Session)
			return
		}
	}
	if h.o.Configure != nil {
		h.o.Configure(r, &req.Options)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, ok := h.streams.Add(cancel)
	if !ok {
		h.reject(w, &resume.StatusError{Status: http.StatusServiceUnavailable, Code: resume.CodeUnavailable,
			Message: "ws: handler closed", RetryAfter: 5 * time.Second}, "")
		return
	}
	defer h.streams.Remove(id, nil)
	// Every write through the recorder's connection has its own deadline
	// (none left on an idle socket), as on a one-session socket.
	c, err := websocket.Accept(&hijackRecorder{ResponseWriter: w, wt: h.wt}, r, h.accept)
	if err != nil {
		h.rejected.Add(1)
		return
	}
	h.started.Add(1)
	h.active.Add(1)
	defer h.active.Add(-1)
	c.SetReadLimit(h.readLimit)
	mc := &manyConn{h: h, c: c, ctx: ctx, batched: c.Subprotocol() == SubprotocolBatch, ready: make(chan struct{}),
		first: make(chan manyMsg, 1), authorize: authorize}
	defer c.CloseNow() //nolint:errcheck // the socket may be closed already
	go mc.read(cancel, req.Cursor == nil && h.resumeWait > 0)

	if req.Cursor == nil && h.resumeWait > 0 {
		t := time.NewTimer(h.resumeWait)
		select {
		case m := <-mc.first:
			if m.Resume != nil {
				cur, epoch, err := manyResume(*m.Resume)
				if err != nil {
					var me *MessageError
					errors.As(err, &me)
					_ = c.Close(ClosePolicyViolation, closeReason("invalid message: "+me.Reason))
					t.Stop()
					return
				}
				if cur != nil {
					if cur.Main.Epoch == "" {
						cur.Main.Epoch = epoch
					}
					cur.Main.Epoch = resume.BusEpoch(cur.Main.Epoch, h.bus.Epoch())
					req.Cursor, req.Options.NoReplay = cur, false
				}
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
	m, err := resume.OpenMany(ctx, h.bus, req, maxSessions, h.idEpoch())
	if err != nil {
		var se *resume.StatusError
		switch {
		case errors.As(err, &se):
			_ = c.Close(ClosePolicyViolation, closeReason(se.Code+": "+se.Message))
		case errors.Is(err, eventbus.ErrClosed):
			_ = c.Close(websocket.StatusGoingAway, "server shutting down")
		default:
			_ = c.Close(websocket.StatusTryAgainLater, "unavailable")
		}
		return
	}
	defer m.Close()
	mc.m = m
	close(mc.ready)
	mc.write()
}

// idEpoch is the epoch ids are written with: "" with PlainIDs.
func (h *Handler) idEpoch() string {
	if h.o.PlainIDs {
		return ""
	}
	return h.bus.Epoch()
}

// manyConn is one many-sessions socket.
type manyConn struct {
	h         *Handler
	c         *websocket.Conn
	ctx       context.Context
	m         *resume.Many
	batched   bool
	ready     chan struct{} // closed once m is set
	first     chan manyMsg  // the first message, while a resume may come
	authorize func(resume.SessionScope) error
	wmu       sync.Mutex
}

// send writes one frame (a batch of one for a batched client).
func (mc *manyConn) send(ev eventbus.Event, cursor string) error {
	b := resume.AppendEnvelope(nil, ev, mc.h.idEpoch())
	if cursor != "" {
		cj, _ := json.Marshal(cursor)
		b = append(append(append(b[:len(b)-1], `,"cursor":`...), cj...), '}')
	}
	if mc.batched {
		b = append(append([]byte{'['}, b...), ']')
	}
	mc.wmu.Lock()
	defer mc.wmu.Unlock()
	ctx, cancel := context.WithTimeout(mc.ctx, mc.h.wt)
	defer cancel()
	err := mc.c.Write(ctx, websocket.MessageText, b)
	if err == nil {
		mc.h.frames.Add(1)
	}
	return err
}

// write is the writer loop: every frame of the connection, a ping in each
// silence of the ping interval.
func (mc *manyConn) write() {
	for {
		var deadline time.Time
		if mc.h.ping > 0 {
			deadline = time.Now().Add(mc.h.ping)
		}
		ev, cursor, err := mc.m.Next(deadline)
		if errors.Is(err, eventbus.ErrTimeout) {
			ctx, cancel := context.WithTimeout(mc.ctx, mc.h.wt)
			err = mc.c.Ping(ctx)
			cancel()
			if err != nil {
				mc.h.writeErrors.Add(1)
				return
			}
			continue
		}
		if err != nil {
			code, reason := closeFor(err)
			if mc.ctx.Err() == nil {
				_ = mc.c.Close(code, reason)
			}
			return
		}
		if err := mc.send(ev, cursor); err != nil {
			mc.h.writeErrors.Add(1)
			return
		}
		if ev.Type == "client_evicted" {
			mc.h.evicted.Add(1)
			_ = mc.c.Close(ClosePolicyViolation, "slow consumer")
			return
		}
	}
}

// read is the reader: the first message (a resume, while awaited), pings,
// subscribe and unsubscribe.
func (mc *manyConn) read(cancel context.CancelFunc, awaiting bool) {
	defer cancel()
	first := true
	for {
		typ, b, err := mc.c.Read(mc.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			mc.h.protocolErrors.Add(1)
			_ = mc.c.Close(CloseUnsupportedData, "binary messages are not accepted (want JSON text)")
			return
		}
		m, err := parseManyMsg(b)
		if err == nil && m.Resume != nil && !(first && awaiting) {
			err = msgErr("resume must be the first message, and only without a cursor in the URL")
		}
		if err != nil {
			mc.h.protocolErrors.Add(1)
			var me *MessageError
			errors.As(err, &me)
			_ = mc.c.Close(ClosePolicyViolation, closeReason("invalid message: "+me.Reason))
			return
		}
		if first && awaiting {
			mc.first <- m
		}
		first = false
		if m.Resume != nil {
			continue
		}
		select {
		case <-mc.ready:
		case <-mc.ctx.Done():
			return
		}
		switch {
		case m.Ping != nil:
			if mc.send(eventbus.Event{Type: "pong", Data: m.Ping}, "") != nil {
				return
			}
			mc.h.pongs.Add(1)
		case m.Type == "unsubscribe":
			if _, err := mc.m.Change(mc.ctx, resume.ManyChange{Remove: []string{*m.Session}}); err != nil {
				return
			}
		case m.Type == "subscribe":
			a, err := resume.ParseManyAdd(*m.Session, m.Scope, m.From)
			if err != nil {
				var se *resume.StatusError
				errors.As(err, &se)
				if mc.send(sessionErrorFrame(*m.Session, se), "") != nil {
					return
				}
				continue
			}
			if _, err := mc.m.Change(mc.ctx, resume.ManyChange{Add: []resume.ManyAdd{a}, Authorize: mc.authorize, ErrorFrames: true}); err != nil {
				return
			}
		}
	}
}

func sessionErrorFrame(session string, se *resume.StatusError) eventbus.Event {
	data, _ := json.Marshal(struct {
		Session string `json:"session"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{session, se.Code, se.Message})
	return eventbus.Event{Type: resume.TypeSessionError, Session: session, Data: data}
}

// isMany reports whether r asks for many sessions: session= in the query,
// or a ServeMux pattern without {id} (ManyPattern).
func isMany(r *http.Request) bool {
	return serve.IsMany(r)
}
