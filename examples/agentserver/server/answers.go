package server

import (
	"errors"
	"net/http"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

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
// unknown or closed session, and a turn active or ended, are answered in
// the words of the stream and turn routes (resume.StatusFor: `session "x"
// not found`, `session "x" closed`, 409 turn_active and turn_ended naming
// the turn), so that every route says the same of the same session.
func (s *Server) writeSessionError(w http.ResponseWriter, err error, id string) {
	if errors.Is(err, eventbus.ErrSessionNotFound) || errors.Is(err, eventbus.ErrSessionClosed) ||
		errors.Is(err, eventbus.ErrTurnActive) || errors.Is(err, eventbus.ErrTurnEnded) {
		resume.WriteError(w, err, id)
		return
	}
	s.writeBusError(w, err)
}

// busErrors are the bus errors with an answer of their own, checked in
// order with errors.Is: the error, its status and its code.
var busErrors = []struct {
	err    error
	status int
	code   string
}{
	{scope.ErrUnknownParent, http.StatusNotFound, "parent_not_found"},
	{scope.ErrCycle, http.StatusConflict, "cycle"},
	{scope.ErrExists, http.StatusConflict, "session_exists"},
	{eventbus.ErrSessionNotFound, http.StatusNotFound, "session_not_found"},
	{eventbus.ErrSessionClosed, http.StatusGone, "session_closed"},
	{eventbus.ErrClosed, http.StatusServiceUnavailable, "unavailable"},
	{eventbus.ErrInvalid, http.StatusBadRequest, "invalid_argument"},
}

// busStatus maps a bus error to its status and code (busErrors; any other
// error is 500 internal_error).
func busStatus(err error) (int, string) {
	for _, e := range busErrors {
		if errors.Is(err, e.err) {
			return e.status, e.code
		}
	}
	return http.StatusInternalServerError, "internal_error"
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]string{"code": code, "message": message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := textutil.MarshalJSON(v)
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
