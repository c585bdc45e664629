package durable_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// benchPayload is one agent-sized event: a text chunk.
const benchPayload = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The quick brown fox jumps over the lazy dog."}}`

func benchBus(b *testing.B) *eventbus.Bus {
	b.Helper()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000, MaxSubscribers: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	return bus
}

// BenchmarkAppend: one JSON message per append. "durable" is a POST
// through the handler (headers, body, JSON validation, the stream's lock,
// the publish); "bus" is the PublishJSON it ends in, the cost every route
// (the SSE route's POST included) shares.
func BenchmarkAppend(b *testing.B) {
	b.Run("durable", func(b *testing.B) {
		bus := benchBus(b)
		h, err := durable.NewHandler(bus, durable.HandlerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		put := httptest.NewRequest(http.MethodPut, durable.Pattern+"s", nil)
		put.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), put)
		b.SetBytes(int64(len(benchPayload)))
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequest(http.MethodPost, durable.Pattern+"s", strings.NewReader(benchPayload))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNoContent {
				b.Fatalf("POST: %d %s", w.Code, w.Body)
			}
		}
	})
	b.Run("bus", func(b *testing.B) {
		bus := benchBus(b)
		data := []byte(benchPayload)
		b.SetBytes(int64(len(benchPayload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bus.PublishJSON("s", "chunk", data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cancelOnWriter cancels a request once a write contains mark: the end of
// an SSE replay, which otherwise stays open for live events.
type cancelOnWriter struct {
	*httptest.ResponseRecorder
	mark   []byte
	cancel context.CancelFunc
}

func (c *cancelOnWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.mark) {
		c.cancel()
	}
	return c.ResponseRecorder.Write(p)
}

// BenchmarkCatchUp: a client reads a session's 1,000 events from the
// start. "durable" is one catch-up GET ?offset=-1 (ChunkBytes raised so
// one answer holds them all); "sse" is the SSE route's replay of the same
// events, up to its replay_complete frame. Bytes are the events' payloads.
func BenchmarkCatchUp(b *testing.B) {
	const n = 1000
	fill := func(b *testing.B) *eventbus.Bus {
		bus := benchBus(b)
		for i := range n {
			if _, err := bus.PublishJSON("s", "chunk", []byte(benchPayload)); err != nil {
				b.Fatal(err, i)
			}
		}
		return bus
	}
	b.Run("durable", func(b *testing.B) {
		bus := fill(b)
		h, err := durable.NewHandler(bus, durable.HandlerOptions{ChunkBytes: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n * int64(len(benchPayload)))
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, durable.Pattern+"s?offset=-1", nil))
			if w.Code != http.StatusOK || w.Header().Get(durable.HeaderUpToDate) != "true" {
				b.Fatalf("GET: %d %s", w.Code, w.Header())
			}
		}
	})
	b.Run("sse", func(b *testing.B) {
		bus := fill(b)
		h, err := sse.NewHandler(bus, sse.HandlerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(sse.Pattern, h)
		b.SetBytes(n * int64(len(benchPayload)))
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			r := httptest.NewRequest(http.MethodGet, "/session/s/events", nil).WithContext(ctx)
			r.Header.Set("Last-Event-ID", "0")
			w := &cancelOnWriter{ResponseRecorder: httptest.NewRecorder(), mark: []byte("replay_complete"), cancel: cancel}
			mux.ServeHTTP(w, r)
			cancel()
			if got := bytes.Count(w.Body.Bytes(), []byte("\nid: ")); got < n-1 {
				b.Fatalf("SSE replayed %d events, want %d", got, n)
			}
		}
	})
}
