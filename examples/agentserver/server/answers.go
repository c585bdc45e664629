package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/replaybus/replaybus/eventbus"
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

// busStatus maps a bus error to its status and code.
func busStatus(err error) (int, string) {
	switch {
	case errors.Is(err, scope.ErrUnknownParent):
		return http.StatusNotFound, "parent_not_found"
	case errors.Is(err, scope.ErrCycle):
		return http.StatusConflict, "cycle"
	case errors.Is(err, scope.ErrExists):
		return http.StatusConflict, "session_exists"
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return http.StatusNotFound, "session_not_found"
	case errors.Is(err, eventbus.ErrSessionClosed):
		return http.StatusGone, "session_closed"
	case errors.Is(err, eventbus.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, eventbus.ErrInvalid):
		return http.StatusBadRequest, "invalid_argument"
	}
	return http.StatusInternalServerError, "internal_error"
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
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
