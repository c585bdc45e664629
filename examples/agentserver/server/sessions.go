package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/observe"
)

// info is GET /info: what the page needs to start, and the counters.
func (s *Server) info(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	types := slices.Clone(s.types)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"epoch":          s.bus.Epoch(),
		"lastEventId":    s.bus.LastEventID(),
		"defaultSession": s.o.DefaultSession,
		"defaultScope":   s.o.DefaultScope.String(),
		"types":          types,
		"bus":            s.bus.Stats(),
		"sse":            s.sse.Stats(),
		"ws":             s.ws.Stats(),
		"durable":        s.durable.Stats(),
	})
}

func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request) {
	list := s.bus.Sessions()
	slices.SortFunc(list, func(a, b observe.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, list)
}

type createRequest struct {
	ID     *string `json:"id"` // nil: absent, an id is generated
	Parent string  `json:"parent"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !checkQuery(w, r) || !s.readBody(w, r, &req, true) {
		return
	}
	var id string
	switch {
	case req.ID == nil:
		id = newID()
	case *req.ID == "":
		// An explicit empty id is a client bug (an unset variable, say),
		// not a request for a generated one.
		writeError(w, http.StatusBadRequest, "invalid_session_id", `empty session id (leave "id" out to have one generated)`)
		return
	default:
		id = *req.ID
		if msg := checkID("session id", id); msg != "" {
			writeError(w, http.StatusBadRequest, "invalid_session_id", msg)
			return
		}
	}
	if req.Parent != "" {
		if msg := checkID("parent", req.Parent); msg != "" {
			writeError(w, http.StatusBadRequest, "invalid_session_id", msg)
			return
		}
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if s.bus.SessionExists(id) {
		writeError(w, http.StatusConflict, "session_exists", fmt.Sprintf("session %q already exists", id))
		return
	}
	if err := s.bus.CreateSession(id, req.Parent); err != nil {
		s.writeBusError(w, err)
		return
	}
	s.log.Debug("session created", "session", id, "parent", req.Parent) // Debug: churn must not flood the log
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	if !validPathID(w, r) || !checkQuery(w, r, "cascade") {
		return
	}
	id := r.PathValue("id")
	if !s.bus.SessionExists(id) && !s.bus.SessionClosed(id) {
		// The bus treats closing an unknown id as a no-op (AgentPool's
		// close_session); over HTTP a typo is worth a 404.
		resume.WriteError(w, eventbus.ErrSessionNotFound, id)
		return
	}
	q, _ := url.ParseQuery(r.URL.RawQuery) // checkQuery parsed it
	var err error
	switch c := q.Get("cascade"); c {
	case "", "0", "false":
		err = s.bus.CloseSession(id)
	case "1", "true":
		err = s.bus.CloseSessionTree(id)
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("cascade %s (want 0, 1, true or false)", quote(c)))
		return
	}
	if err != nil {
		s.writeBusError(w, err)
		return
	}
	s.log.Debug("session closed", "session", id)
	w.WriteHeader(http.StatusNoContent)
}

// addType records an event type for /info, up to maxTypes of them.
func (s *Server) addType(t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.types, t)
	if found || len(s.types) >= maxTypes {
		return
	}
	s.types = slices.Insert(s.types, i, t)
}

// newID returns a random session id such as "s-1f2e3d4c5b6a".
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}
