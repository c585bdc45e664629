package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/replaybus/replaybus/eventbus"
)

// httpError is an error answer: its status, code and message.
type httpError struct {
	status  int
	code    string
	message string
	hdr     map[string]string
}

func (e *httpError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// with adds a header to the error answer.
func (e *httpError) with(k, v string) *httpError {
	if e.hdr == nil {
		e.hdr = map[string]string{}
	}
	e.hdr[k] = v
	return e
}

// fail writes err as a JSON error answer {"code","message"}.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = h.busError(err)
	}
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "durable: refused", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Int("status", he.status), slog.String("message", he.message))
	hd := w.Header()
	for k, v := range he.hdr {
		hd.Set(k, v)
	}
	hd.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(he.status)
		return
	}
	hd.Set("Content-Type", "application/json; charset=utf-8")
	b, _ := json.Marshal(map[string]string{"code": he.code, "message": he.message})
	w.WriteHeader(he.status)
	_, _ = w.Write(append(b, '\n'))
}

// busError maps a bus error onto an answer.
func (h *Handler) busError(err error) *httpError {
	switch {
	case errors.Is(err, errGone):
		return errorf(http.StatusGone, "ring_evicted", "the offset is before what the stream still holds (the replay buffer evicted it, or it is from another epoch)")
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return errorf(http.StatusTooManyRequests, "subscriber_limit_exceeded", "%v", err).with("Retry-After", "1")
	case errors.Is(err, eventbus.ErrInvalid):
		return errorf(http.StatusBadRequest, "invalid_argument", "%v", err)
	case errors.Is(err, errors.ErrUnsupported):
		return errorf(http.StatusNotImplemented, "not_implemented", "%v", err)
	case errors.Is(err, eventbus.ErrClosed):
		return errorf(http.StatusServiceUnavailable, "unavailable", "the bus is closed")
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return errorf(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, eventbus.ErrSessionClosed):
		return errorf(http.StatusConflict, "stream_closed", "the session was closed: %v", err).with(HeaderClosed, "true")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, "unavailable", "%v", err)
	}
	h.log.Error("durable: bus error", slog.Any("err", err))
	return errorf(http.StatusInternalServerError, "internal_error", "%v", err)
}
