package coalesce_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// The coalescing benchmarks. Run them side by side (the machine is shared):
//
//	go test -run '^$' -bench 'Coalesce' -benchmem ./coalesce/

// chunkData is one demo-sized ACP text delta (a two-letter token).
func chunkData(i int) map[string]any {
	return map[string]any{"sessionId": "s1", "update": map[string]any{"sessionUpdate": "agent_message_chunk",
		"content": map[string]any{"type": "text", "text": string(rune('a'+i%26)) + " "}}}
}

var modes = []struct {
	name string
	c    eventbus.Coalescer
}{{"off", nil}, {"acp", coalesce.ACP}}

// BenchmarkCoalesceReadEvery100ms models a client that reads every 100 ms
// while a session streams 1,000 deltas/s, in simulated time: each
// iteration is one 100 ms tick (100 deltas published, then the client
// takes everything queued). It reports the frames and SSE bytes such a
// client receives per second; ns/op is the whole tick (publish + read +
// encode).
func BenchmarkCoalesceReadEvery100ms(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			bus := newBus(b, eventbus.Options{})
			sub := subscribe(b, bus, "s1", eventbus.SubscribeOptions{Coalesce: m.c, NoReplay: true})
			var frames, bytes int
			buf := make([]byte, 0, 64<<10)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range 100 {
					if _, err := bus.Publish("s1", "agent_message_chunk", chunkData(j)); err != nil {
						b.Fatal(err)
					}
				}
				for {
					ev, ok := sub.TryNext()
					if !ok {
						break
					}
					frames++
					buf = sse.AppendEvent(buf[:0], ev, sse.EncodeOptions{})
					bytes += len(buf)
				}
			}
			ticks := float64(b.N)
			b.ReportMetric(float64(frames)/ticks*10, "frames/s")
			b.ReportMetric(float64(bytes)/ticks*10, "B/s")
			b.ReportMetric(0, "ns/op") // the tick cost is not what this measures
		})
	}
}

// BenchmarkCoalesceConsumerPerEvent is the consumer-side cost per published
// event: publish 100 deltas, take everything with TryNext; ns/op and
// allocs/op are per event.
func BenchmarkCoalesceConsumerPerEvent(b *testing.B) {
	for _, m := range append(modes, struct {
		name string
		c    eventbus.Coalescer
	}{"agentpool", coalesce.AgentPool}) {
		b.Run(m.name, func(b *testing.B) {
			bus := newBus(b, eventbus.Options{})
			sub := subscribe(b, bus, "s1", eventbus.SubscribeOptions{Coalesce: m.c, NoReplay: true})
			typ, data := "agent_message_chunk", any(nil)
			if m.name == "agentpool" {
				typ = "part_delta"
			}
			const batch = 100
			datas := make([][]byte, batch)
			for j := range datas {
				if m.name == "agentpool" {
					data = mustData(text(0, "a "))
				} else {
					data = chunkData(j)
				}
				ev, err := bus.Publish("s1", typ, data) // pre-encode through the bus once
				if err != nil {
					b.Fatal(err)
				}
				datas[j] = ev.Data
			}
			for {
				if _, ok := sub.TryNext(); !ok {
					break
				}
			}
			b.ResetTimer()
			var pubNs, readNs time.Duration
			frames := 0
			for i := 0; i < b.N; i += batch {
				t0 := time.Now()
				for j := 0; j < batch && i+j < b.N; j++ {
					if _, err := bus.Publish("s1", typ, rawJSON(datas[j])); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				pubNs += t1.Sub(t0)
				for {
					if _, ok := sub.TryNext(); !ok {
						break
					}
					frames++
				}
				readNs += time.Since(t1)
			}
			b.ReportMetric(float64(pubNs.Nanoseconds())/float64(b.N), "publish-ns/event")
			b.ReportMetric(float64(readNs.Nanoseconds())/float64(b.N), "consume-ns/event")
			b.ReportMetric(float64(b.N)/float64(max(frames, 1)), "events/frame")
		})
	}
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// BenchmarkCoalesceSSE streams 1,000 deltas/s (one per ms, real time) to
// an SSE client over loopback HTTP and counts the frames and bytes the
// server writes; each iteration is 100 ms of stream. How often the client
// reads does not change what the server writes (the socket buffers absorb
// it), so without ?throttle= the handler, which takes each event as soon as
// it is queued, rarely finds more than one to merge: coalescing alone helps
// a consumer that falls behind, the throttle a fast one. It reports
// frames/s and bytes/s and the deltas/s actually published.
func BenchmarkCoalesceSSE(b *testing.B) {
	for _, q := range []string{"coalesce=off", "coalesce=acp", "coalesce=acp&throttle=100ms", "coalesce=acp&throttle=150ms"} {
		b.Run(q, func(b *testing.B) {
			bus, err := eventbus.New(eventbus.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer bus.Close()
			if err := bus.CreateSession("s1", ""); err != nil {
				b.Fatal(err)
			}
			h, err := sse.NewHandler(bus, sse.HandlerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle(sse.Pattern, h)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			defer h.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/session/s1/events?replay=0&"+q, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
			var frames, bytes atomic.Int64
			var lastID atomic.Uint64          // the last id the client read
			arrived := make(chan struct{}, 1) // an id line was read
			done := make(chan struct{})
			go func() {
				defer close(done)
				br := bufio.NewReaderSize(resp.Body, 64<<10)
				for {
					line, err := br.ReadSlice('\n')
					bytes.Add(int64(len(line)))
					if err != nil && err != bufio.ErrBufferFull {
						return
					}
					if len(line) == 1 { // the blank line that ends a frame
						frames.Add(1)
					}
					if v, ok := strings.CutPrefix(string(line), "id: "); ok {
						if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
							lastID.Store(id)
							select {
							case arrived <- struct{}{}:
							default:
							}
						}
					}
				}
			}()
			published := 0
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				tick := time.Now()
				for j := range 100 {
					// The workload is a stream of one delta per ms of real
					// time: the pause is what is measured, not a wait.
					if d := time.Until(tick.Add(time.Duration(j) * time.Millisecond)); d > 0 {
						time.Sleep(d)
					}
					if _, err := bus.Publish("s1", "agent_message_chunk", chunkData(j)); err != nil {
						b.Fatal(err)
					}
					published++
				}
			}
			secs := time.Since(start).Seconds()
			// What is still held in a throttle window or in flight: wait
			// until the client has read the last id published.
			for want := bus.LastEventID(); lastID.Load() < want; {
				select {
				case <-arrived:
				case <-done:
					b.Fatalf("the stream ended at id %d of %d", lastID.Load(), want)
				case <-time.After(10 * time.Second):
					b.Fatalf("the stream stopped at id %d of %d", lastID.Load(), want)
				}
			}
			cancel()
			<-done
			b.ReportMetric(float64(frames.Load()-1)/secs, "frames/s") // minus the retry: line
			b.ReportMetric(float64(bytes.Load())/secs, "B/s")
			b.ReportMetric(float64(published)/secs, "deltas/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
