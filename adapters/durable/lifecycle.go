package durable

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
)

// Stats are a Handler's counters; see [Handler.Stats]. Active, Streams and
// Subscriptions are current, the others totals since the handler was
// made. The JSON names are lowerCamel, as those of the SSE and WebSocket
// handlers' Stats (the example server's GET /info can carry them all).
type Stats struct {
	Active        int    `json:"active"`        // requests being served now (a long-poll or SSE answer while it lasts)
	Streams       int    `json:"streams"`       // stream records held (closed streams' content included)
	Subscriptions int    `json:"subscriptions"` // §6 subscriptions (HandlerOptions.Subscriptions)
	Started       uint64 `json:"started"`       // stream requests answered with a success status
	Rejected      uint64 `json:"rejected"`      // stream requests answered with an error status
	Appended      uint64 `json:"appended"`      // events appended (one per JSON message or other append; wake events too)
	Reads         uint64 `json:"reads"`         // catch-up answers
	LongPolls     uint64 `json:"longPolls"`     // long-poll answers (data or 204)
	SSE           uint64 `json:"sse"`           // SSE answers started
	WriteErrors   uint64 `json:"writeErrors"`   // SSE answers ended by a failed or timed-out write
}

// counters are the handler's totals (Stats).
type counters struct {
	started, rejected, appended, reads, longPolls, sse, writeErrors atomic.Uint64
}

// Stats returns the handler's counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	st := Stats{Active: h.requests.Each(nil), Streams: h.streams.Size(),
		Started: h.cnt.started.Load(), Rejected: h.cnt.rejected.Load(), Appended: h.cnt.appended.Load(),
		Reads: h.cnt.reads.Load(), LongPolls: h.cnt.longPolls.Load(), SSE: h.cnt.sse.Load(),
		WriteErrors: h.cnt.writeErrors.Load()}
	if h.subs != nil {
		h.subs.mu.Lock()
		st.Subscriptions = len(h.subs.subs)
		h.subs.mu.Unlock()
	}
	return st
}

// Close makes the handler refuse new requests (503 unavailable,
// Retry-After 5: a Durable Streams client retries them) and ends every
// open read at once — a long-poll answers 503, an SSE answer ends and its
// client resumes from its last control event's offset — while appends,
// creates and deletes in progress finish; it stops the subscriptions'
// webhook deliveries and lease timers. It does not wait; see
// [Handler.Shutdown]. The streams (the bus's sessions and the records)
// stay. Idempotent; always nil. Suitable for
// http.Server.RegisterOnShutdown.
func (h *Handler) Close() error {
	h.requests.Close()
	h.stopSubs()
	return nil
}

// Shutdown is [Handler.Close] followed by waiting until every request has
// returned from ServeHTTP and every webhook delivery has ended, or until
// ctx ends (then it returns ctx's error).
func (h *Handler) Shutdown(ctx context.Context) error {
	if err := h.requests.Shutdown(ctx); err != nil {
		h.stopSubs()
		return err
	}
	h.stopSubs()
	if h.subs == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { // ends when the cancelled deliveries return (within webhookTimeout)
		h.subs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// admit registers r for Close and Shutdown and returns the request to
// serve (a live read's context ends with Close), its id in h.requests and
// the cancel to call when it is done; false, having answered 503, once the
// handler is closed.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (*http.Request, uint64, context.CancelFunc, bool) {
	cancel := noCancel
	if r.Method == http.MethodGet && strings.Contains(r.URL.RawQuery, "live=") {
		// Only a live read, which waits, ends at Close: a catch-up read
		// answers at once, and an append or a close in progress finishes
		// (its stream's lock keeps it short).
		var ctx context.Context
		ctx, cancel = context.WithCancel(r.Context())
		r = r.WithContext(ctx)
	}
	id, ok := h.requests.Add(cancel)
	if !ok {
		cancel()
		h.cnt.rejected.Add(1)
		h.deadline(w)
		(&resume.StatusError{Status: http.StatusServiceUnavailable, Code: resume.CodeUnavailable,
			Message: "the Durable Streams handler is closed", RetryAfter: 5 * time.Second}).Answer(w)
		return r, 0, nil, false
	}
	return r, id, cancel, true
}

// noCancel is the cancel of a request that Close does not end.
func noCancel() {}
