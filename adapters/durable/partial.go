package durable

import (
	"crypto/sha256"
	"fmt"
	"net/http"
)

// maxPartials bounds the part-way failed appends a stream remembers (one
// per producer id); past it an arbitrary one is forgotten, and its retry
// is then answered as a duplicate (docs/durable-streams.md, deviation 12).
const maxPartials = 64

// partialAppend is an idempotent producer's append of several messages
// (a JSON array) that failed part-way: the bus recorded the producer's
// tuple with the first message, so a retry of the same request is a
// duplicate to the bus; stored of the messages were stored. The handler
// that served it stores the rest when the producer retries the same
// request (same tuple, same body) instead of answering 204.
type partialAppend struct {
	epoch, seq uint64
	sum        [sha256.Size]byte // the body's
	stored     int               // messages stored, from the first
	first      uint64            // the offset of the first stored
	last       uint64            // the offset of the last stored
}

// resumeFrom returns the part-way failed append of this stream that a
// retry of p's append with body goes on with (stored 0: none); a retry
// whose body differs is refused. Called with s.mu held.
func (s *stream) resumeFrom(p *producerReq, body []byte) (partialAppend, error) {
	pa, ok := s.partials[p.id]
	if !ok || pa.epoch != p.epoch || pa.seq != p.seq {
		return partialAppend{}, nil
	}
	if sha256.Sum256(body) != pa.sum {
		return partialAppend{}, errorf(http.StatusConflict, "partial_append_mismatch", "producer %s epoch %d sequence %d was partly stored (%d messages) with another body: retry it with the same body", quote(p.id), p.epoch, p.seq, pa.stored)
	}
	return pa, nil
}

// notePartial remembers that p's append with body stored its first stored
// messages, at offsets first to last (nil p: nothing to remember); stored
// 0 forgets p's entry. Called with s.mu held.
func (s *stream) notePartial(p *producerReq, body []byte, stored int, first, last uint64) {
	if p == nil {
		return
	}
	if stored == 0 {
		delete(s.partials, p.id)
		return
	}
	if s.partials == nil {
		s.partials = make(map[string]partialAppend)
	}
	if _, ok := s.partials[p.id]; !ok && len(s.partials) >= maxPartials {
		for id := range s.partials {
			delete(s.partials, id)
			break
		}
	}
	s.partials[p.id] = partialAppend{epoch: p.epoch, seq: p.seq, sum: sha256.Sum256(body), stored: stored, first: first, last: last}
}

// partialError is the answer to an append that stored only its first
// stored of total messages before err: err's status, code
// partial_append, a message naming how many and which offsets were
// stored (first, last), and what a producer does next.
func (h *Handler) partialError(err error, p *producerReq, stored, total int, first, last uint64) error {
	se := h.statusOf(err, "", http.MethodPost)
	next := "the rest is not stored: append it again without the stored messages"
	if p != nil {
		next = "retry the same request (same producer tuple and body) on this server to store the rest"
	}
	se.Code = "partial_append"
	se.Message = fmt.Sprintf("stored %d of %d messages (offsets %s to %s) before: %s; %s",
		stored, total, h.offset(first), h.offset(last), se.Message, next)
	return &se
}
