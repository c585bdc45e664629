package durable_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// flakyBackend is a backend.ProducerBackend kept in memory whose plain
// appends can be made to fail (failNext), as a NATS publish times out; it
// records what it stored and feeds nothing back.
type flakyBackend struct {
	mu        sync.Mutex
	id        uint64
	stored    []string // the Data of every event stored, in order
	recs      map[string]producer.State
	revs      map[string]uint64
	failNext  int // plain appends to refuse from now on
	failAfter int // plain appends to store before refusing failNext
}

var errFlaky = errors.New("flaky: no ack")

func (f *flakyBackend) Epoch() string                             { return "flaky" }
func (f *flakyBackend) Start(context.Context, backend.Feed) error { return nil }
func (f *flakyBackend) Close() error                              { return nil }
func (f *flakyBackend) Append(_ context.Context, _ []string, ev backend.Record) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 && ev.Type == durable.DefaultEventType {
		if f.failAfter > 0 {
			f.failAfter--
		} else {
			f.failNext--
			return 0, errFlaky
		}
	}
	f.id++
	if ev.Type == durable.DefaultEventType {
		f.stored = append(f.stored, string(ev.Data))
	}
	return f.id, nil
}
func (f *flakyBackend) ProducerState(_ context.Context, session, id string) (producer.State, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recs[session+"/"+id], f.revs[session+"/"+id], nil
}
func (f *flakyBackend) AppendProducer(_ context.Context, path []string, ev backend.Record, p producer.Stamp, rev uint64) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := path[len(path)-1] + "/" + p.ID
	if f.revs[k] != rev {
		return 0, 0, backend.ErrProducerConflict
	}
	f.id += 2
	f.stored = append(f.stored, string(ev.Data))
	f.recs[k] = producer.State{Epoch: p.Epoch, LastSeq: p.Seq, LastID: f.id - 1}
	f.revs[k] = f.id
	return f.id - 1, f.id, nil
}

func (f *flakyBackend) storedData() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stored...)
}

// newFlakyRig is a handler over a flakyBackend, with a JSON stream "j".
func newFlakyRig(t *testing.T) (*rig, *flakyBackend) {
	fb := &flakyBackend{recs: map[string]producer.State{}, revs: map[string]uint64{}}
	bus, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, fb)
	require.NoError(t, err)
	h, err := durable.NewHandler(bus, durable.HandlerOptions{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); _ = bus.Close() })
	r := &rig{bus: bus, h: h, url: srv.URL + durable.Pattern}
	resp, body := r.do(t, http.MethodPut, "j", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	return r, fb
}

// failNext makes the backend refuse its next n plain appends.
func (f *flakyBackend) failNextAppends(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = n
}

// An idempotent producer's append of a JSON array that the backend fails
// part-way (here on its second message, as a NATS publish that gets no
// ack) is answered with an error naming what was stored (partial_append:
// how many messages, their offsets), and the producer's retry of the same
// request stores the rest — not a 204 duplicate with only the first
// message stored. A retry that fails part-way again goes on from where it
// stopped; once complete, a further retry is the duplicate it is.
func TestProducerArrayAppendFailingPartWay(t *testing.T) {
	r, fb := newFlakyRig(t)
	stamp := []string{"Content-Type", "application/json", "Producer-Id", "w", "Producer-Epoch", "0", "Producer-Seq", "0"}
	fb.failNextAppends(1) // the array's second message
	resp, body := r.do(t, http.MethodPost, "j", `[1,2,3,4]`, stamp...)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Contains(t, body, `"code":"partial_append"`)
	require.Contains(t, body, "stored 1 of 4 messages (offsets ")
	require.Contains(t, body, "retry the same request")
	require.NotEmpty(t, resp.Header.Get(durable.HeaderNextOffset), "the answer names the tail")
	require.Equal(t, []string{"1"}, fb.storedData())

	// A retry with another body is refused: it is not the same request.
	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3,5]`, stamp...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, `"code":"partial_append_mismatch"`)

	fb.failNextAppends(1) // the retry fails at once, on the second message again
	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3,4]`, stamp...)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Contains(t, body, "stored 1 of 4 messages (offsets ")
	require.Equal(t, []string{"1"}, fb.storedData())

	fb.mu.Lock()
	fb.failNext, fb.failAfter = 1, 1 // the next retry fails part-way too: on the third message
	fb.mu.Unlock()
	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3,4]`, stamp...)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Contains(t, body, "stored 2 of 4 messages (offsets ")
	require.Equal(t, []string{"1", "2"}, fb.storedData())

	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3,4]`, stamp...)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the retry stores the rest: %s", body)
	require.Equal(t, "0", resp.Header.Get(durable.HeaderProducerSeq))
	require.Equal(t, []string{"1", "2", "3", "4"}, fb.storedData(), "every message once, in order")

	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3,4]`, stamp...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "complete: a further retry is a duplicate: %s", body)
	require.Equal(t, []string{"1", "2", "3", "4"}, fb.storedData())

	// The producer's next request is an ordinary one.
	stamp[len(stamp)-1] = "1"
	resp, body = r.do(t, http.MethodPost, "j", `[6]`, stamp...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, []string{"1", "2", "3", "4", "6"}, fb.storedData())
}

// An append without a producer that fails part-way says what it stored
// too; a retry would store those messages again, so the answer tells the
// client to append only the rest.
func TestArrayAppendFailingPartWayWithoutProducer(t *testing.T) {
	r, fb := newFlakyRig(t)
	fb.mu.Lock()
	fb.failNext, fb.failAfter = 1, 1 // the array's second message
	fb.mu.Unlock()
	resp, body := r.do(t, http.MethodPost, "j", `[1,2,3]`, "Content-Type", "application/json")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Contains(t, body, `"code":"partial_append"`)
	require.Contains(t, body, "stored 1 of 3 messages")
	require.Contains(t, body, "append it again without the stored messages")
	require.Equal(t, []string{"1"}, fb.storedData())
}
