package durable

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/internal/textutil"
)

// maxProducerInt is the largest Producer-Epoch and Producer-Seq accepted:
// 2^53−1, for JavaScript clients (PROTOCOL.md §5.2.1).
const maxProducerInt = 1<<53 - 1

// producerReq is an append's Producer-Id, Producer-Epoch and Producer-Seq.
type producerReq struct {
	id         string
	epoch, seq uint64
}

// parseProducer reads the three producer headers: all or none (400
// otherwise), a non-empty id, integers 0 … 2^53−1.
func parseProducer(r *http.Request) (*producerReq, error) {
	id, idOK := r.Header[http.CanonicalHeaderKey(HeaderProducerID)]
	ep, epOK := r.Header[http.CanonicalHeaderKey(HeaderProducerEp)]
	sq, sqOK := r.Header[http.CanonicalHeaderKey(HeaderProducerSeq)]
	if !idOK && !epOK && !sqOK {
		return nil, nil
	}
	if !idOK || !epOK || !sqOK {
		return nil, errorf(http.StatusBadRequest, "invalid_producer", "Producer-Id, Producer-Epoch and Producer-Seq go together")
	}
	if len(id) != 1 || id[0] == "" {
		return nil, errorf(http.StatusBadRequest, "invalid_producer", "Producer-Id must be one non-empty value")
	}
	p := &producerReq{id: id[0]}
	for _, f := range []struct {
		name string
		vals []string
		dst  *uint64
	}{{HeaderProducerEp, ep, &p.epoch}, {HeaderProducerSeq, sq, &p.seq}} {
		if len(f.vals) != 1 || !ttlRE.MatchString(f.vals[0]) {
			return nil, errorf(http.StatusBadRequest, "invalid_producer", "%s %s is not an integer 0…2^53-1", f.name, quote(strings.Join(f.vals, ",")))
		}
		v, err := strconv.ParseUint(f.vals[0], 10, 64)
		if err != nil || v > maxProducerInt {
			return nil, errorf(http.StatusBadRequest, "invalid_producer", "%s %s is not an integer 0…2^53-1", f.name, quote(f.vals[0]))
		}
		*f.dst = v
	}
	return p, nil
}

// bus is p as the bus's producer tuple.
func (p *producerReq) bus() producer.Stamp {
	return producer.Stamp{ID: p.id, Epoch: p.epoch, Seq: p.seq}
}

// producerAnswer maps the bus's verdict on p (eventbus.WithProducer,
// Bus.CheckProducer) onto PROTOCOL.md §5.2.1's answers: accepted (nil),
// a duplicate (dup, with the highest accepted sequence: 204), a stale
// epoch (403 naming the epoch in force) or a sequence gap (409 naming the
// expected and received sequences), as resume.StatusFor answers them on
// every route, and a new epoch not at 0 (400 invalid_producer). Other
// errors come back as they are.
func producerAnswer(err error, p *producerReq) (dup bool, lastSeq uint64, ans error) {
	var pe *producer.Error
	switch {
	case err == nil:
		return false, p.seq, nil
	case errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate):
		return true, pe.LastSeq, nil
	case errors.Is(err, producer.ErrStaleEpoch), errors.Is(err, producer.ErrSequenceGap):
		return false, 0, resume.StatusFor(err, "")
	case errors.Is(err, eventbus.ErrInvalid):
		return false, 0, errorf(http.StatusBadRequest, "invalid_producer", "%s", textutil.PublicMessage(err))
	}
	return false, 0, err
}

// append serves POST: append, close, or both, with the Stream-Seq and
// idempotent producer checks.
func (h *Handler) append(w http.ResponseWriter, r *http.Request, name string) error {
	s, err := h.lookup(name)
	if err != nil {
		return err
	}
	p, err := parseProducer(r)
	if err != nil {
		return err
	}
	body, err := h.body(w, r)
	if err != nil {
		return err
	}
	closing := strings.EqualFold(r.Header.Get(HeaderClosed), "true")
	if len(body) == 0 && !closing {
		return errorf(http.StatusBadRequest, "empty_body", "an append needs a body (or Stream-Closed: true to close)")
	}
	ct := r.Header.Get("Content-Type")
	if len(body) > 0 && ct == "" {
		return errorf(http.StatusBadRequest, "missing_content_type", "an append with a body needs a Content-Type")
	}
	s.touch()
	before, appended := h.tail(s), false
	defer func() { // after the stream's lock is released (a pull-wake writes a stream)
		if appended {
			h.notifySubs(s.id, before)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	hd := w.Header()
	if p != nil && s.closed.Load() && s.closedBy.hadProducer && s.closedBy.id == p.id &&
		s.closedBy.epoch == p.epoch && s.closedBy.seq == p.seq {
		producerHeaders(w, p, p.seq)
		hd.Set(HeaderNextOffset, h.offset(h.tailLocked(s)))
		hd.Set(HeaderClosed, "true")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	start := 0                // the first message to publish: > 0 resumes an append failed part-way
	var resumed partialAppend // what that append stored
	if p != nil && !s.closed.Load() {
		// The bus's record decides (it is checked again, atomically, when
		// the first item is published): a duplicate is answered before the
		// Stream-Seq check, which a retry would fail.
		err := h.bus.CheckProducer(s.id, p.bus())
		if errors.Is(err, eventbus.ErrSessionClosed) || errors.Is(err, eventbus.ErrSessionNotFound) {
			h.closedElsewhereLocked(s)
		} else {
			dup, last, err := producerAnswer(err, p)
			if err != nil {
				return err
			}
			if dup && last == p.seq { // the producer has not gone on since
				if resumed, err = s.resumeFrom(p, body); err != nil {
					return err
				}
				start = resumed.stored
			}
			if dup && start == 0 {
				producerHeaders(w, p, last)
				hd.Set(HeaderNextOffset, h.offset(h.tailLocked(s)))
				w.WriteHeader(http.StatusNoContent)
				return nil
			}
		}
	}
	if s.closed.Load() {
		if closing && len(body) == 0 {
			hd.Set(HeaderNextOffset, h.offset(s.tail.Load()))
			hd.Set(HeaderClosed, "true")
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return withHeader(errorf(http.StatusConflict, resume.CodeSessionClosed, "stream %s is closed", quote(s.id)), HeaderClosed, "true", HeaderNextOffset, h.offset(s.tail.Load()))
	}
	var msgs [][]byte
	if len(body) > 0 {
		if mediaType(ct) != mediaType(s.ctype) {
			return errorf(http.StatusConflict, "content_type_mismatch", "Content-Type %s does not match the stream's %s", quote(ct), quote(s.ctype))
		}
		if msgs, err = h.split(s, body, false); err != nil {
			return err
		}
	}
	if seq := r.Header.Get(HeaderSeq); seq != "" && start == 0 { // a resumed retry passed it the first time
		if s.lastSeq != "" && seq <= s.lastSeq {
			return errorf(http.StatusConflict, "sequence_regression", "Stream-Seq %s is not after the last %s", quote(seq), quote(s.lastSeq))
		}
		s.lastSeq = seq
	}
	first, last := resumed.first, resumed.last // the offsets the append stored
	for i := start; i < len(msgs); i++ {
		var opts []eventbus.PublishOption
		if p != nil && i == 0 {
			// The batch's first event carries the tuple: the bus checks
			// and records it in the same step as it stores the event.
			opts = append(opts, eventbus.WithProducer(p.bus()))
		}
		id, err := h.publish(s, msgs[i], opts...)
		if err == nil && first == 0 {
			first = id
		}
		if err == nil {
			last = id
		}
		if err != nil && i > 0 {
			// Part-way: the messages before i are stored (and, for a
			// producer, its tuple recorded with the first): say so, and
			// let the producer's retry of the same request store the rest.
			s.notePartial(p, body, i, first, last)
			if errors.Is(err, eventbus.ErrSessionClosed) || errors.Is(err, eventbus.ErrSessionNotFound) {
				h.closedElsewhereLocked(s)
			}
			return withHeader(h.partialError(err, p, i, len(msgs), first, last), HeaderNextOffset, h.offset(s.tail.Load()))
		}
		if err != nil {
			if p != nil && i == 0 {
				dup, last, ans := producerAnswer(err, p)
				if dup { // a retry that raced this one through another route
					producerHeaders(w, p, last)
					hd.Set(HeaderNextOffset, h.offset(h.tailLocked(s)))
					w.WriteHeader(http.StatusNoContent)
					return nil
				}
				if ans != err {
					return ans
				}
			}
			if errors.Is(err, eventbus.ErrSessionClosed) || errors.Is(err, eventbus.ErrSessionNotFound) {
				// Closed (or expired) by the bus or another route: the
				// stream's EOF at the tail it had.
				h.closedElsewhereLocked(s)
				return withHeader(errorf(http.StatusConflict, resume.CodeSessionClosed, "stream %s is closed", quote(s.id)), HeaderClosed, "true", HeaderNextOffset, h.offset(s.tail.Load()))
			}
			return err
		}
		appended = true
	}
	if p != nil {
		s.notePartial(p, nil, 0, 0, 0) // done: a part-way failure of p is complete or superseded
		producerHeaders(w, p, p.seq)
	}
	if closing {
		if err := h.freeze(r.Context(), s); err != nil {
			return err
		}
		s.closed.Store(true)
		s.closedBy = closeTuple{hadProducer: p != nil}
		if p != nil {
			s.closedBy.id, s.closedBy.epoch, s.closedBy.seq = p.id, p.epoch, p.seq
		}
		hd.Set(HeaderClosed, "true")
	}
	hd.Set(HeaderNextOffset, h.offset(s.tail.Load()))
	if p != nil && len(msgs) > 0 {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// producerHeaders echoes the producer's epoch and the highest sequence
// accepted in it.
func producerHeaders(w http.ResponseWriter, p *producerReq, seq uint64) {
	hd := w.Header()
	hd.Set(HeaderProducerEp, strconv.FormatUint(p.epoch, 10))
	hd.Set(HeaderProducerSeq, strconv.FormatUint(seq, 10))
}
