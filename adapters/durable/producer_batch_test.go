//go:build reviewrepro

package durable_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
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
	mu       sync.Mutex
	id       uint64
	stored   []string // the Data of every event stored, in order
	recs     map[string]producer.State
	revs     map[string]uint64
	failNext int // plain appends to refuse from now on
}

var errFlaky = errors.New("flaky: no ack")

func (f *flakyBackend) Epoch() string                             { return "flaky" }
func (f *flakyBackend) Start(context.Context, backend.Feed) error { return nil }
func (f *flakyBackend) Close() error                              { return nil }
func (f *flakyBackend) Append(_ context.Context, _ []string, ev eventbus.Event) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 && ev.Type == durable.DefaultEventType {
		f.failNext--
		return 0, errFlaky
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
func (f *flakyBackend) AppendProducer(_ context.Context, _ []string, ev eventbus.Event, p producer.Stamp, rev uint64) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := ev.Session + "/" + p.ID
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

// An idempotent producer's append of a JSON array is one unit: when the
// backend fails part-way through it (here on its second message, as a
// NATS publish that gets no ack), the request fails, and the producer's
// retry with the same Producer-Seq stores what is missing (or is refused)
// — it must not be acknowledged as a duplicate while only the first
// message is stored.
func TestProducerArrayAppendFailingPartWayIsNotAcknowledgedOnRetry(t *testing.T) {
	fb := &flakyBackend{recs: map[string]producer.State{}, revs: map[string]uint64{}}
	bus, err := backend.New(context.Background(), eventbus.Options{}, fb)
	require.NoError(t, err)
	h, err := durable.NewHandler(bus, durable.HandlerOptions{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); _ = bus.Close() })
	r := &rig{bus: bus, h: h, url: srv.URL + durable.Pattern}

	resp, body := r.do(t, http.MethodPut, "j", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	stamp := []string{"Content-Type", "application/json", "Producer-Id", "w", "Producer-Epoch", "0", "Producer-Seq", "0"}
	fb.mu.Lock()
	fb.failNext = 1 // the array's second message
	fb.mu.Unlock()
	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3]`, stamp...)
	assert.GreaterOrEqual(t, resp.StatusCode, 400, "a part-way failure fails the request: %s", body)

	// The producer retries the same request, as the protocol tells it to.
	resp, body = r.do(t, http.MethodPost, "j", `[1,2,3]`, stamp...)
	stored := fb.storedData()
	if resp.StatusCode < 300 {
		assert.Equal(t, []string{"1", "2", "3"}, stored,
			"the retry was acknowledged (%d %s): every message of the append must be stored", resp.StatusCode, body)
	}
}
