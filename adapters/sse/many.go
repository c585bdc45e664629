package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// Many sessions on one connection (docs/protocol.md): the handler mounted
// without a session in its path serves GET {events}?session=a&session=b…,
// and POST {events}/{conn} changes the set of one of its open streams.
const (
	// ManyPattern is the pattern of the many-sessions stream:
	// mux.Handle(sse.ManyPattern, h).
	ManyPattern = "GET /events"
	// ChangePattern is the pattern of the route that adds sessions to and
	// removes them from an open many-sessions stream: mux.Handle(sse.ChangePattern, h).
	ChangePattern = "POST /events/{conn}"
	// MaxChangeBytes bounds the body of POST {events}/{conn}.
	MaxChangeBytes = 64 << 10
)

// isMany reports whether r is a many-sessions request: session= in the
// query, or a ServeMux pattern without {id} (ManyPattern), so that a
// request there without session= is told so rather than how to mount.
func (h *Handler) isMany(r *http.Request) bool {
	return serve.IsMany(r)
}

// serveMany serves GET {events}?session=…: the set's frames in id order,
// each event's id: line the connection cursor.
func (h *Handler) serveMany(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		h.reject(w, &resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed (want GET)", r.Method)}, "")
		return
	}
	req, err := resume.ParseManyRequest(r, h.bus.Epoch(), h.o.Query, h.maxSessions)
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
	if h.o.Authorize != nil {
		set := req.Sessions
		if req.Cursor != nil {
			set = req.Cursor.Set(req.Sessions)
		}
		for _, s := range set {
			if err := h.authorize(r, s); err != nil {
				h.reject(w, err, s.Session)
				return
			}
		}
	}
	if h.o.Configure != nil {
		h.o.Configure(r, &req.Options)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := &streamState{cancel: cancel}
	id, ok := h.register(st)
	if !ok {
		h.goAway(w)
		return
	}
	defer h.unregister(id)
	idEpoch := h.encOpts.Epoch
	m, err := resume.OpenMany(ctx, h.bus, req, h.maxSessions, idEpoch)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, eventbus.ErrClosed):
			h.goAway(w)
		default:
			h.reject(w, err, "")
		}
		return
	}
	defer m.Close()
	h.conns.Store(m.ID(), m)
	defer h.conns.Delete(m.ID())
	h.started.Add(1)
	reason := h.manyLoop(ctx, w, m, req.Message, st)
	if h.o.Logger != nil {
		h.o.Logger.DebugContext(ctx, "sse: many-sessions stream ended", "connection", m.ID(), "remote", r.RemoteAddr, "reason", reason)
	}
}

func (h *Handler) authorize(r *http.Request, s resume.SessionScope) error {
	if err := h.o.Authorize(r, s.Session, s.Scope); err != nil {
		var se *resume.StatusError
		if !errors.As(err, &se) {
			se = &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
		}
		return se
	}
	return nil
}

// manyLoop writes the headers, the retry line and every frame of m, with
// heartbeats in the gaps, until something ends the stream.
func (h *Handler) manyLoop(ctx context.Context, w http.ResponseWriter, m *resume.Many, message bool, st *streamState) error {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("X-Accel-Buffering", "no")
	hd.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{h: h, ctx: ctx, rc: http.NewResponseController(w), enc: NewEncoder(w, EncodeOptions{})}
	defer sw.rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort
	var buf []byte
	if h.retry > 0 {
		buf = appendRetry(buf, h.retry)
	}
	sw.begin()
	if err := sw.end(writeAll(w, buf)); err != nil {
		return err
	}
	lastWrite := time.Now()
	for {
		var deadline time.Time
		if h.hb > 0 {
			deadline = lastWrite.Add(h.hb)
		}
		ev, cursor, err := m.Next(deadline)
		if err != nil {
			if errors.Is(err, eventbus.ErrTimeout) {
				sw.begin()
				if err := sw.end(sw.enc.comment("heartbeat")); err != nil {
					return err
				}
				st.heartbeats.Add(1)
				lastWrite = time.Now()
				continue
			}
			return err
		}
		f := Frame{ID: cursor, Data: resume.AppendEnvelope(nil, ev, "")}
		if !message {
			f.Event = ev.Type
		}
		buf = AppendFrame(buf[:0], f)
		sw.begin()
		_, err = w.Write(buf)
		if err = sw.end(err); err != nil {
			return err
		}
		st.frames.Add(1)
		lastWrite = time.Now()
	}
}

// serveChange serves POST {events}/{conn}: it applies the body's adds and
// removes to that open stream and answers the new set. A body cut by the
// server's read deadline is 408 request_timeout (Connection: close).
func (h *Handler) serveChange(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(resume.HeaderEpoch, h.bus.Epoch())
	answer := func(err error) {
		h.rejected.Add(1)
		resume.WriteError(w, err, "")
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		answer(&resume.StatusError{Status: http.StatusMethodNotAllowed, Code: resume.CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed (want POST)", r.Method)})
		return
	}
	if err := h.cross.Check(r); err != nil {
		answer(&resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbiddenOrigin,
			Message: "a page of another origin may not change this stream's sessions"})
		return
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		answer(&resume.StatusError{Status: http.StatusUnsupportedMediaType, Code: resume.CodeUnsupportedMediaType,
			Message: fmt.Sprintf("Content-Type %q is not supported (want application/json)", ct)})
		return
	}
	rc := http.NewResponseController(w)
	if h.bt > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(h.bt)) // ErrNotSupported: nothing to bound
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxChangeBytes))
	if err == nil && h.bt > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			answer(&resume.StatusError{Status: http.StatusRequestEntityTooLarge, Code: resume.CodeBodyTooLarge,
				Message: fmt.Sprintf("body over %d bytes", MaxChangeBytes)})
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) { // BodyTimeout, or the server's own bound
			answer(&resume.StatusError{Status: http.StatusRequestTimeout, Code: resume.CodeRequestTimeout,
				Message: fmt.Sprintf("the body did not arrive in time (%d bytes arrived)", len(body)),
				Header:  http.Header{"Connection": {"close"}}})
			return
		}
		answer(&resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidJSON, Message: "reading the body failed"})
		return
	}
	c, err := resume.ParseManyChange(body)
	if err != nil {
		answer(err)
		return
	}
	if h.o.Authorize != nil {
		c.Authorize = func(s resume.SessionScope) error { return h.authorize(r, s) }
	}
	conn := r.PathValue("conn")
	m, ok := h.conns.Load(conn)
	if !ok {
		answer(&resume.StatusError{Status: http.StatusNotFound, Code: resume.CodeConnectionNotFound,
			Message: fmt.Sprintf("connection %q not found on this server", conn)})
		return
	}
	res, err := m.Change(r.Context(), c)
	if err != nil {
		answer(err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // as every other answer
	_ = enc.Encode(res)
}

// newConns returns the registry of open many-sessions streams by id.
func newConns() *xsync.MapOf[string, *resume.Many] { return xsync.NewMapOf[string, *resume.Many]() }
