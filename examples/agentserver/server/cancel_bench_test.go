package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// The loopback harness of issue 29: the example server in memory behind a
// real TCP listener, turns of its model started with POST
// /session/{id}/messages, and the time from sending POST
// /session/{id}/cancel to reading the turn's turn_end{cancelled} on an SSE
// stream of the session (the Go client, sse.Subscribe). Figures:
// docs/benchmarks.md. Run with
//
//	go test -run '^$' -bench 'CancelOverHTTP' -benchtime 200x ./examples/agentserver/server

// ends is an SSE stream's turn_end arrivals: the reader goroutine notes
// when each turn's turn_end{cancelled} was read.
type ends struct {
	mu   sync.Mutex
	at   map[string]time.Time // by session/turn
	wake chan struct{}
}

// watch reads stream s until ctx ends, noting turn starts and ends.
func watch(b *testing.B, s *sse.Stream) *ends {
	e := &ends{at: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	go func() {
		for {
			ev, err := s.Next()
			if err != nil {
				return
			}
			if ev.Type != frame.TypeTurnEnd && ev.Type != frame.TypeTurnStart {
				continue
			}
			now := time.Now()
			var d frame.TurnData
			if json.Unmarshal(ev.Data, &d) != nil {
				continue
			}
			key := ev.Session + "/" + d.Turn + "/" + ev.Type
			if ev.Type == frame.TypeTurnEnd && d.Reason != frame.ReasonCancelled {
				b.Errorf("turn %s ended %s, want cancelled", d.Turn, d.Reason)
			}
			e.mu.Lock()
			e.at[key] = now
			e.mu.Unlock()
			select {
			case e.wake <- struct{}{}:
			default:
			}
		}
	}()
	return e
}

// wait waits until every key has arrived and returns the latest arrival.
func (e *ends) wait(b *testing.B, keys []string) time.Time {
	deadline := time.After(30 * time.Second)
	for {
		e.mu.Lock()
		var last time.Time
		missing := 0
		for _, k := range keys {
			t, ok := e.at[k]
			if !ok {
				missing++
			} else if t.After(last) {
				last = t
			}
		}
		e.mu.Unlock()
		if missing == 0 {
			return last
		}
		select {
		case <-e.wake:
		case <-deadline:
			b.Fatalf("%d of %d turn records never arrived", missing, len(keys))
		}
	}
}

// harness is the example server on a loopback listener.
type harness struct {
	srv  *Server
	ts   *httptest.Server
	base string
}

func newHarness(b *testing.B) *harness {
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	// A slow model: every turn still runs when its cancel comes.
	srv, err := New(bus, Options{AgentRate: 20})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(func() {
		_ = srv.StopAgents(context.Background())
		_ = srv.Close()
		ts.Close()
		_ = bus.Close()
	})
	return &harness{srv: srv, ts: ts, base: ts.URL}
}

func (h *harness) post(b *testing.B, path, body string) map[string]any {
	resp, err := http.Post(h.base+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// percentiles reports p50, p99 and the maximum of ds, in ms.
func percentiles(b *testing.B, what string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(at(0.50)), what+"-p50-ms")
	b.ReportMetric(ms(at(0.99)), what+"-p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), what+"-max-ms")
	b.ReportMetric(0, "ns/op") // the figures are the latencies above, not the loop's time
}

// BenchmarkCancelOverHTTP: per op, a turn of the model on one session and
// its stop: POST cancel → turn_end{cancelled} read on the session's SSE
// stream.
func BenchmarkCancelOverHTTP(b *testing.B) {
	h := newHarness(b)
	if err := h.srv.Bus().CreateSession("s", ""); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := sse.Subscribe(ctx, h.base+"/session/s/events", sse.StreamOptions{})
	defer stream.Close()
	e := watch(b, stream)
	b.ReportAllocs()
	var lat []time.Duration
	for b.Loop() {
		turn := h.post(b, "/session/s/messages", `{"text":"stream 100000"}`)["turn"].(string)
		e.wait(b, []string{"s/" + turn + "/" + frame.TypeTurnStart})
		t0 := time.Now()
		h.post(b, "/session/s/cancel", "")
		lat = append(lat, e.wait(b, []string{"s/" + turn + "/" + frame.TypeTurnEnd}).Sub(t0))
	}
	percentiles(b, "cancel-to-turn_end", lat)
}

// BenchmarkCascadeCancelOverHTTP: per op, a turn of the model on a root
// and on each of its 14 sub-agents (three levels: 2, 4 and 8 sessions),
// then one cascading cancel of the root: POST cancel {"cascade":true} →
// the last of the 15 turn_end{cancelled} read on the root's SSE stream
// (scope descendants).
func BenchmarkCascadeCancelOverHTTP(b *testing.B) {
	h := newHarness(b)
	bus := h.srv.Bus()
	sessions := []string{"root"}
	if err := bus.CreateSession("root", ""); err != nil {
		b.Fatal(err)
	}
	for level, parents := 0, []string{"root"}; level < 3; level++ {
		var next []string
		for _, p := range parents {
			for i := range 2 {
				c := fmt.Sprintf("%s.%d", p, i)
				if err := bus.CreateSession(c, p); err != nil {
					b.Fatal(err)
				}
				next = append(next, c)
			}
		}
		sessions = append(sessions, next...)
		parents = next
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := sse.Subscribe(ctx, h.base+"/session/root/events?scope=descendants", sse.StreamOptions{})
	defer stream.Close()
	e := watch(b, stream)
	b.ReportAllocs()
	var lat []time.Duration
	for b.Loop() {
		var starts, endKeys []string
		for _, s := range sessions {
			turn := h.post(b, "/session/"+s+"/messages", `{"text":"stream 100000"}`)["turn"].(string)
			starts = append(starts, s+"/"+turn+"/"+frame.TypeTurnStart)
			endKeys = append(endKeys, s+"/"+turn+"/"+frame.TypeTurnEnd)
		}
		e.wait(b, starts)
		t0 := time.Now()
		res := h.post(b, "/session/root/cancel", `{"cascade":true}`)
		if n := len(res["cancelled"].([]any)); n != len(sessions) {
			b.Fatalf("the cascade cancelled %d turns, want %d", n, len(sessions))
		}
		lat = append(lat, e.wait(b, endKeys).Sub(t0))
	}
	percentiles(b, "cascade-to-last-turn_end", lat)
}
