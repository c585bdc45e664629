package server

import (
	"encoding/json"
	"net/http"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

type publishRequest struct {
	Type   string          `json:"type"`
	Data   json.RawMessage `json:"data"`
	Origin string          `json:"origin"`
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	if !validPathID(w, r) {
		return
	}
	var req publishRequest
	if !checkQuery(w, r) || !s.readBody(w, r, &req, false) {
		return
	}
	if req.Type == "" {
		writeError(w, http.StatusBadRequest, "invalid_argument", `missing "type"`)
		return
	}
	if msg := checkOrigin(req.Origin); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_argument", msg)
		return
	}
	var data any
	if len(req.Data) > 0 && string(req.Data) != "null" {
		data = req.Data
	}
	// A session nobody created is a 404, as GET answers: a typo must not
	// create a session (the library's Publish keeps AgentPool's
	// create-on-first-publish; eventbus.Existing turns it off here).
	opts := []eventbus.PublishOption{eventbus.Existing()}
	if req.Origin != "" {
		opts = append(opts, eventbus.WithOrigin(req.Origin))
	}
	ev, err := s.bus.Publish(r.PathValue("id"), req.Type, data, opts...)
	if err != nil {
		s.writeSessionError(w, err, r.PathValue("id"))
		return
	}
	s.addType(req.Type)
	// The answer carries the epoch, and the id in the form the SSE stream
	// writes it (epoch-qualified unless HandlerOptions.PlainIDs), so that a
	// publisher that resumes from its own event uses a cursor that detects
	// a restart instead of silently pointing into the next incarnation.
	epoch := s.bus.Epoch()
	cursor := resume.FormatID(ev.ID, "")
	if !s.o.SSE.PlainIDs {
		cursor = resume.FormatID(ev.ID, epoch)
	}
	writeJSON(w, http.StatusAccepted, publishAnswer{ID: ev.ID, Epoch: epoch, Cursor: cursor})
}

// publishAnswer is the 202 answer of POST /session/{id}/events.
type publishAnswer struct {
	ID     uint64 `json:"id"`     // the event id
	Epoch  string `json:"epoch"`  // the bus epoch the id belongs to
	Cursor string `json:"cursor"` // the id as the SSE stream writes it, for Last-Event-ID
}
