package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers on POST /session/{id}/events: the Durable Streams
// headers (PROTOCOL.md §5.2.1), mapped onto eventbus.WithProducer.
const (
	headerProducerID  = "Producer-Id"           // the producer's stable id
	headerProducerEp  = "Producer-Epoch"        // its epoch, raised on every restart
	headerProducerSeq = "Producer-Seq"          // 0, 1, 2, … within an epoch
	headerExpectedSeq = "Producer-Expected-Seq" // on a 409 sequence gap: the sequence expected
)

// parseProducer reads the producer headers of a publish: none (nil), or
// all three; a bad or partial set is answered 400 invalid_producer here
// (ok false).
func parseProducer(w http.ResponseWriter, r *http.Request) (p *producer.Stamp, ok bool) {
	id, ep, sq := r.Header.Get(headerProducerID), r.Header.Get(headerProducerEp), r.Header.Get(headerProducerSeq)
	if id == "" && ep == "" && sq == "" {
		return nil, true
	}
	epoch, err1 := strconv.ParseUint(ep, 10, 64)
	seq, err2 := strconv.ParseUint(sq, 10, 64)
	if id == "" || err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "invalid_producer",
			"Producer-Id (non-empty), Producer-Epoch and Producer-Seq (unsigned integers) go together; got "+
				strconv.Quote(id)+", "+strconv.Quote(ep)+", "+strconv.Quote(sq))
		return nil, false
	}
	return &producer.Stamp{ID: id, Epoch: epoch, Seq: seq}, true
}

// producerRefusal answers a publish the bus did not store because of its
// producer stamp p and reports whether err was one: a duplicate is
// acknowledged (200, with "duplicate": true and, as the publish answer,
// the id of the producer's last accepted event, whose sequence
// Producer-Seq names: the repeated event's own when the repeat is of the
// last sequence, the last one's for an older one), a stale epoch is 403 stale_producer_epoch naming
// the epoch in force (Producer-Epoch), a gap 409 producer_seq_gap naming
// the expected sequence (Producer-Expected-Seq), a bus that cannot check
// producers 501 not_implemented.
func (s *Server) producerRefusal(w http.ResponseWriter, err error, p *producer.Stamp) bool {
	var pe *producer.Error
	switch {
	case p == nil:
		return false
	case errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate):
		w.Header().Set(headerProducerEp, strconv.FormatUint(pe.Epoch, 10))
		w.Header().Set(headerProducerSeq, strconv.FormatUint(pe.LastSeq, 10))
		writeJSON(w, http.StatusOK, s.answer(pe.LastID, true))
	case errors.As(err, &pe) && errors.Is(err, producer.ErrStaleEpoch):
		w.Header().Set(headerProducerEp, strconv.FormatUint(pe.Epoch, 10))
		writeError(w, http.StatusForbidden, "stale_producer_epoch", err.Error())
	case errors.As(err, &pe) && errors.Is(err, producer.ErrSequenceGap):
		w.Header().Set(headerExpectedSeq, strconv.FormatUint(pe.Expected, 10))
		writeError(w, http.StatusConflict, "producer_seq_gap", err.Error())
	case errors.Is(err, errors.ErrUnsupported):
		writeError(w, http.StatusNotImplemented, "not_implemented", err.Error())
	default:
		return false
	}
	return true
}

// withProducer adds p's option to opts (nil p: none).
func withProducer(opts []eventbus.PublishOption, p *producer.Stamp) []eventbus.PublishOption {
	if p == nil {
		return opts
	}
	return append(opts, eventbus.WithProducer(*p))
}
