package server

import (
	"encoding/json"
	"net/http"
	"strconv"

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
	if !checkQuery(w, r) {
		return
	}
	p, ok := parseProducer(w, r)
	if !ok || !s.readBody(w, r, &req, false) {
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
	ev, err := s.bus.Publish(r.PathValue("id"), req.Type, data, withProducer(opts, p)...)
	if s.producerRefusal(w, err, p) {
		return
	}
	if err != nil {
		s.writeSessionError(w, err, r.PathValue("id"))
		return
	}
	s.addType(req.Type)
	if p != nil {
		w.Header().Set(headerProducerEp, strconv.FormatUint(p.Epoch, 10))
		w.Header().Set(headerProducerSeq, strconv.FormatUint(p.Seq, 10))
	}
	writeJSON(w, http.StatusAccepted, s.answer(ev.ID, false))
}

// answer is the answer of a publish of event id: it carries the epoch,
// and the id in the form the SSE stream writes it (epoch-qualified unless
// HandlerOptions.PlainIDs), so that a publisher that resumes from its own
// event uses a cursor that detects a restart instead of silently pointing
// into the next incarnation.
func (s *Server) answer(id uint64, duplicate bool) publishAnswer {
	epoch := s.bus.Epoch()
	cursor := resume.FormatID(id, "")
	if !s.o.SSE.PlainIDs {
		cursor = resume.FormatID(id, epoch)
	}
	return publishAnswer{ID: id, Epoch: epoch, Cursor: cursor, Duplicate: duplicate}
}

// publishAnswer is the answer of POST /session/{id}/events: 202, or 200
// for a producer's duplicate.
type publishAnswer struct {
	ID     uint64 `json:"id"`     // the event id (a duplicate: the producer's last accepted one's, 0 when unknown)
	Epoch  string `json:"epoch"`  // the bus epoch the id belongs to
	Cursor string `json:"cursor"` // the id as the SSE stream writes it, for Last-Event-ID
	// Duplicate: the publish repeated one of its producer's already
	// stored (Producer-Id/-Epoch/-Seq); nothing was stored again.
	Duplicate bool `json:"duplicate,omitempty"`
}
