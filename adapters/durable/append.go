package durable

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
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
			return nil, errorf(http.StatusBadRequest, "invalid_producer", "%s %q is not an integer 0…2^53-1", f.name, strings.Join(f.vals, ","))
		}
		v, err := strconv.ParseUint(f.vals[0], 10, 64)
		if err != nil || v > maxProducerInt {
			return nil, errorf(http.StatusBadRequest, "invalid_producer", "%s %q is not an integer 0…2^53-1", f.name, f.vals[0])
		}
		*f.dst = v
	}
	return p, nil
}

// producerVerdict is what the producer check decided for one append.
type producerVerdict int

const (
	producerAccept    producerVerdict = iota // new data: append it
	producerDuplicate                        // a retry of an accepted append: 204, nothing appended
)

// checkProducer applies PROTOCOL.md §5.2.1's validation to p on s (s.mu
// held): a stale epoch is 403 naming the current one, a new epoch must
// start at seq 0 (400), a sequence at or below the last accepted is a
// duplicate, one above the next is a gap (409 naming the expected one).
// It changes no state; commitProducer records an accepted append.
func checkProducer(s *stream, p *producerReq) (producerVerdict, error) {
	st := s.producers[p.id]
	if st == nil {
		if p.seq != 0 {
			return 0, errorf(http.StatusConflict, "producer_seq_gap", "producer %q: sequence %d, expected 0", p.id, p.seq).
				with(HeaderExpectedSeq, "0").with(HeaderReceivedSeq, strconv.FormatUint(p.seq, 10))
		}
		return producerAccept, nil
	}
	switch {
	case p.epoch < st.epoch:
		return 0, errorf(http.StatusForbidden, "stale_producer_epoch", "producer %q: epoch %d is older than the current %d", p.id, p.epoch, st.epoch).
			with(HeaderProducerEp, strconv.FormatUint(st.epoch, 10))
	case p.epoch > st.epoch:
		if p.seq != 0 {
			return 0, errorf(http.StatusBadRequest, "invalid_producer", "producer %q: a new epoch %d must start at sequence 0, not %d", p.id, p.epoch, p.seq)
		}
		return producerAccept, nil
	case p.seq <= st.lastSeq:
		return producerDuplicate, nil
	case p.seq == st.lastSeq+1:
		return producerAccept, nil
	}
	return 0, errorf(http.StatusConflict, "producer_seq_gap", "producer %q: sequence %d, expected %d", p.id, p.seq, st.lastSeq+1).
		with(HeaderExpectedSeq, strconv.FormatUint(st.lastSeq+1, 10)).with(HeaderReceivedSeq, strconv.FormatUint(p.seq, 10))
}

// commitProducer records p's accepted append on s (s.mu held).
func commitProducer(s *stream, p *producerReq) {
	s.producers[p.id] = &producer{epoch: p.epoch, lastSeq: p.seq}
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
	before, appended := s.tail.Load(), false
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
		h.producerHeaders(w, s, p)
		hd.Set(HeaderNextOffset, h.offset(s.tail.Load()))
		hd.Set(HeaderClosed, "true")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	var verdict producerVerdict
	if p != nil {
		if verdict, err = checkProducer(s, p); err != nil {
			return err
		}
	}
	if s.closed.Load() {
		if closing && len(body) == 0 {
			hd.Set(HeaderNextOffset, h.offset(s.tail.Load()))
			hd.Set(HeaderClosed, "true")
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return errorf(http.StatusConflict, "stream_closed", "stream %q is closed", s.id).
			with(HeaderClosed, "true").with(HeaderNextOffset, h.offset(s.tail.Load()))
	}
	if verdict == producerDuplicate {
		h.producerHeaders(w, s, p)
		hd.Set(HeaderNextOffset, h.offset(s.tail.Load()))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	var msgs [][]byte
	if len(body) > 0 {
		if mediaType(ct) != mediaType(s.ctype) {
			return errorf(http.StatusConflict, "content_type_mismatch", "Content-Type %q does not match the stream's %q", ct, s.ctype)
		}
		if msgs, err = h.split(s, body, false); err != nil {
			return err
		}
	}
	if seq := r.Header.Get(HeaderSeq); seq != "" {
		if s.lastSeq != "" && seq <= s.lastSeq {
			return errorf(http.StatusConflict, "sequence_regression", "Stream-Seq %q is not after the last %q", seq, s.lastSeq)
		}
		s.lastSeq = seq
	}
	for _, m := range msgs {
		if _, err := h.publish(s, m); err != nil {
			if errors.Is(err, eventbus.ErrSessionClosed) || errors.Is(err, eventbus.ErrSessionNotFound) {
				// Closed (or expired) by the bus or another route: the
				// stream's EOF at the tail it had.
				h.closedElsewhereLocked(s)
				return errorf(http.StatusConflict, "stream_closed", "stream %q is closed", s.id).
					with(HeaderClosed, "true").with(HeaderNextOffset, h.offset(s.tail.Load()))
			}
			return err
		}
		appended = true
	}
	if p != nil {
		commitProducer(s, p)
		h.producerHeaders(w, s, p)
	}
	if closing {
		if err := h.freeze(r.Context(), s); err != nil {
			return err
		}
		s.closed.Store(true)
		s.closedBy = closeTuple{hadProducer: p != nil, closedOffset: s.tail.Load()}
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

// producerHeaders echoes the producer's epoch and highest accepted seq.
func (h *Handler) producerHeaders(w http.ResponseWriter, s *stream, p *producerReq) {
	hd := w.Header()
	hd.Set(HeaderProducerEp, strconv.FormatUint(p.epoch, 10))
	seq := p.seq
	if st := s.producers[p.id]; st != nil && st.epoch == p.epoch {
		seq = st.lastSeq
	}
	hd.Set(HeaderProducerSeq, fmt.Sprint(seq))
}
