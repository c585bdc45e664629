package server

import (
	"net/http"
	"strconv"
)

// healthz is GET /healthz: 200 {"status":"ok"}, or 503
// {"status":"unavailable","message":…} with Retry-After while
// Options.Ready reports the backend down.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if s.o.Ready != nil {
		if err := s.o.Ready(); err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "message": publicMessage(err)})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503 answered
// while Options.Ready reports the backend down.
const RetryAfterUnavailable = 1

// ready answers 503 unavailable with Retry-After when Options.Ready reports
// the backend down, and reports whether to go on.
func (s *Server) ready(w http.ResponseWriter) bool {
	if s.o.Ready == nil {
		return true
	}
	err := s.o.Ready()
	if err == nil {
		return true
	}
	writeUnavailable(w, err)
	return false
}

// writeUnavailable answers 503 unavailable with Retry-After, saying why.
func writeUnavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
	writeError(w, http.StatusServiceUnavailable, "unavailable", "the event bus's backend is unavailable, retry: "+publicMessage(err))
}

// whenReady runs h only while the backend is ready (see Options.Ready).
func (s *Server) whenReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.ready(w) {
			h(w, r)
		}
	}
}
