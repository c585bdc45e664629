package eventbus_test

// Benchmarks of the in-memory bus (issue 6). Figures go in
// docs/benchmarks.md, never in assertions; the cross-system comparison is the
// bench/ module. Every benchmark reports allocations, and those that fan out
// also report ns/delivery (wall time ÷ events × subscribers).
//
//	go test -run '^$' -bench . -benchtime 2s ./eventbus/

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// benchPayload is a 256-byte JSON payload shaped like an ACP
// agent_message_chunk update, passed as json.RawMessage so the bus validates
// and copies it but does not re-encode it.
var benchPayload = func() json.RawMessage {
	const prefix = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	const suffix = `"}}`
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 8)[:256-len(prefix)-len(suffix)]
	return json.RawMessage(prefix + text + suffix)
}()

const benchType = "agent_message_chunk"

// benchLossless are live-queue limits no benchmark reaches, so a draining
// subscriber is never evicted however far the publisher runs ahead.
var benchLossless = eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30}

func benchNewBus(b *testing.B, cfg eventbus.Options) *eventbus.Bus {
	b.Helper()
	if cfg.MaxSubscribers == 0 {
		cfg.MaxSubscribers = 100_000
	}
	bus, err := eventbus.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return bus
}

// benchDrainer reads subscriptions until each has seen want real events (or
// ended), one goroutine per subscription, as SSE handlers do.
type benchDrainer struct {
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	errs   []error
}

func benchDrain(subs []*eventbus.Subscription, want int) *benchDrainer {
	d := &benchDrainer{}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, s := range subs {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			var last uint64
			for got := 0; got < want; {
				ev, err := s.Next(d.ctx)
				if err != nil {
					if d.ctx.Err() == nil {
						d.fail(fmt.Errorf("subscriber %d after %d events: %w", s.ID(), got, err))
					}
					return
				}
				if ev.ID == 0 {
					continue
				}
				if ev.ID <= last {
					d.fail(fmt.Errorf("subscriber %d: id %d after %d", s.ID(), ev.ID, last))
					return
				}
				last = ev.ID
				got++
			}
		}()
	}
	return d
}

func (d *benchDrainer) fail(err error) {
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}

// wait waits for every reader, at most limit, and fails b on a reader error.
func (d *benchDrainer) wait(b *testing.B, limit time.Duration) {
	b.Helper()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		d.cancel()
		<-done
		b.Fatalf("readers did not finish within %v", limit)
	}
	d.cancel()
	if len(d.errs) > 0 {
		b.Fatal(d.errs[0])
	}
}

func benchSubscribe(b *testing.B, bus *eventbus.Bus, session string, n int, o eventbus.SubscribeOptions) []*eventbus.Subscription {
	b.Helper()
	subs := make([]*eventbus.Subscription, n)
	for i := range subs {
		s, err := bus.Subscribe(context.Background(), session, o)
		if err != nil {
			b.Fatal(err)
		}
		subs[i] = s
	}
	return subs
}

func benchPublish(b *testing.B, bus *eventbus.Bus, session string) {
	if _, err := bus.Publish(session, benchType, benchPayload); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPublish is W1 in-process: one publisher, S subscribers each read
// by its own goroutine, queue limits that nothing reaches. ns/op is per
// publish, including the time the readers need to catch up; ns/delivery
// divides it by S; wakes/delivery is the goroutine hand-offs the publisher
// paid per delivery (a wake-up goes only to a consumer that has parked, so
// a consumer still working through its batch costs none).
func BenchmarkPublish(b *testing.B) {
	for _, S := range []int{0, 1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", S), func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{})
			defer bus.Close()
			subs := benchSubscribe(b, bus, "s", S, benchLossless)
			d := benchDrain(subs, b.N)
			var wakes atomic.Int64
			eventbus.SetTestHookWake(func() { wakes.Add(1) })
			defer eventbus.SetTestHookWake(nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchPublish(b, bus, "s")
			}
			d.wait(b, time.Minute)
			b.StopTimer()
			if S > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(S), "ns/delivery")
				b.ReportMetric(float64(wakes.Load())/float64(b.N)/float64(S), "wakes/delivery")
			}
			for _, s := range subs {
				s.Close()
			}
		})
	}
}

// BenchmarkPublishStalled is W2's publish side: 100 subscribers, one of
// which never reads, against none stalled. Under drop_subscriber the stalled
// one is evicted once its queue is full (1000 frames), so after the first
// thousand publishes it costs nothing; under drop_newest it stays and every
// publish takes its drop path (announced, counted).
func BenchmarkPublishStalled(b *testing.B) {
	for _, c := range []struct {
		name   string
		policy eventbus.OverflowPolicy // "" = none stalled
	}{
		{"none", ""},
		{"one/drop_subscriber", eventbus.DropSubscriber},
		{"one/drop_newest", eventbus.DropNewest},
		{"one/drop_oldest", eventbus.DropOldest},
	} {
		b.Run(c.name, func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{})
			defer bus.Close()
			live := 100
			var stalled *eventbus.Subscription
			if c.policy != "" {
				live = 99
				stalled = benchSubscribe(b, bus, "s", 1, eventbus.SubscribeOptions{NoReplay: true, Policy: c.policy})[0]
				defer stalled.Close()
			}
			subs := benchSubscribe(b, bus, "s", live, benchLossless)
			d := benchDrain(subs, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchPublish(b, bus, "s")
			}
			d.wait(b, time.Minute)
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/delivery")
			for _, s := range subs {
				s.Close()
			}
		})
	}
}

// BenchmarkSubscribeReplay is W3: subscribe with a cursor before the oldest
// buffered event of a full, wrapped replay buffer and read the replay through
// replay_complete, frame by frame with TryNext. ns/op is one whole resume;
// ns/event divides by the buffer size.
func BenchmarkSubscribeReplay(b *testing.B) {
	benchReplay(b, func(s *eventbus.Subscription) (int, bool) {
		got := 0
		for {
			ev, ok := s.TryNext()
			if !ok {
				return got, false
			}
			if ev.Type == frame.TypeReplayComplete {
				return got, true
			}
			got++
		}
	})
}

// BenchmarkSubscribeReplayNext is BenchmarkSubscribeReplay read frame by
// frame with Next and a caller's context that is not the subscription's (the
// default read path porters use; issue 32.5).
func BenchmarkSubscribeReplayNext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchReplay(b, func(s *eventbus.Subscription) (int, bool) {
		got := 0
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				return got, false
			}
			if ev.Type == frame.TypeReplayComplete {
				return got, true
			}
			got++
		}
	})
}

// BenchmarkSubscribeReplayBatch is BenchmarkSubscribeReplay read in batches
// of 64 with NextBatch, as the SSE handler reads (issue 22.2).
func BenchmarkSubscribeReplayBatch(b *testing.B) {
	buf := make([]eventbus.Event, 64)
	past := time.Unix(1, 0)
	benchReplay(b, func(s *eventbus.Subscription) (int, bool) {
		got := 0
		for {
			n, err := s.NextBatch(past, buf)
			if err != nil {
				return got, false
			}
			for i := range buf[:n] {
				if buf[i].Type == frame.TypeReplayComplete {
					return got, true
				}
				got++
			}
		}
	})
}

// benchReplay runs a W3 benchmark per ring size: read returns how many
// replayed events it read and whether replay_complete ended them.
func benchReplay(b *testing.B, read func(*eventbus.Subscription) (int, bool)) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{ReplayBufferSize: n})
			defer bus.Close()
			for i := 0; i < 3*n; i++ {
				benchPublish(b, bus, "s")
			}
			cursor := bus.LastEventID() - uint64(n)
			o := eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := bus.Subscribe(ctx, "s", o)
				if err != nil {
					b.Fatal(err)
				}
				got, complete := read(s)
				if !complete {
					b.Fatalf("replay stopped after %d events", got)
				}
				if got != n {
					b.Fatalf("replayed %d events, want %d", got, n)
				}
				s.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/event")
		})
	}
}

// BenchmarkDescendantsFanOut publishes round-robin to a tree of one root and
// ten children. One descendants subscriber on the root hears everything, one
// session subscriber per child hears its own session: two deliveries per
// publish to a child, one per publish to the root.
func BenchmarkDescendantsFanOut(b *testing.B) {
	bus := benchNewBus(b, eventbus.Options{})
	defer bus.Close()
	sessions := []string{"root"}
	if err := bus.CreateSession("root", ""); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("child-%d", i)
		if err := bus.CreateSession(id, "root"); err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, id)
	}
	o := benchLossless
	o.Scope = scope.Descendants
	rootSub := benchSubscribe(b, bus, "root", 1, o)
	// Each child hears every 11th publish; b.N is not a multiple of 11.
	perChild := make([]int, 10)
	for i := 0; i < b.N; i++ {
		if k := i % 11; k > 0 {
			perChild[k-1]++
		}
	}
	var all []*eventbus.Subscription
	readers := []*benchDrainer{benchDrain(rootSub, b.N)}
	for i, id := range sessions[1:] {
		s := benchSubscribe(b, bus, id, 1, benchLossless)
		readers = append(readers, benchDrain(s, perChild[i]))
		all = append(all, s...)
	}
	all = append(all, rootSub...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchPublish(b, bus, sessions[i%11])
	}
	for _, d := range readers {
		d.wait(b, time.Minute)
	}
	b.StopTimer()
	for _, s := range all {
		s.Close()
	}
}

// BenchmarkSlowClient is the cost of the backpressure paths: a subscriber
// with a 100-frame queue that never reads gets 75 publishes (no warning),
// then the publish that crosses 75 % (slow_client_warning), then enough to
// overflow (client_evicted, unregistered). ns/op is one whole episode of
// subscribe + 101 publishes + eviction; the steady-state variants measure
// one publish that drops for a full drop_newest / drop_oldest subscriber.
func BenchmarkSlowClient(b *testing.B) {
	b.Run("warn_then_evict", func(b *testing.B) {
		bus := benchNewBus(b, eventbus.Options{})
		defer bus.Close()
		o := eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 100}
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s, err := bus.Subscribe(ctx, "s", o)
			if err != nil {
				b.Fatal(err)
			}
			for j := 0; j < 101; j++ {
				benchPublish(b, bus, "s")
			}
			select {
			case <-s.Done():
			default:
				b.Fatal("subscriber not evicted")
			}
		}
		st := bus.Stats()
		if st.Evicted != uint64(b.N) || st.Warnings != uint64(b.N) {
			b.Fatalf("evicted %d, warned %d, want %d each", st.Evicted, st.Warnings, b.N)
		}
	})
	for _, p := range []eventbus.OverflowPolicy{eventbus.DropNewest, eventbus.DropOldest} {
		b.Run(string(p)+"_full", func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{})
			defer bus.Close()
			s := benchSubscribe(b, bus, "s", 1, eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 100, Policy: p})[0]
			defer s.Close()
			for j := 0; j < 100; j++ {
				benchPublish(b, bus, "s")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchPublish(b, bus, "s")
			}
		})
	}
}

// BenchmarkPublishParallel is W6 in-process: GOMAXPROCS publishers, each
// on its own session tree (a root), with 0, 1 and 10 subscribers per
// session each read by its own goroutine, against the single publisher of
// BenchmarkPublish. ns/op is per publish (aggregate), including the time the
// readers need to catch up. mutex-wait-ns/op is the time goroutines spent
// blocked on a sync.Mutex or sync.RWMutex per publish (runtime/metrics
// /sync/mutex/wait/total:seconds): with one lock per tree the publishers
// themselves do not wait for each other, so what remains is the readers'
// own subscriber mutex — a figure that, unlike the wall time, a machine
// shared with other work does not hide.
func BenchmarkPublishParallel(b *testing.B) {
	for _, S := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("subs=%d", S), func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{})
			defer bus.Close()
			P := runtime.GOMAXPROCS(0)
			type tree struct {
				name string
				subs []*eventbus.Subscription
				read []atomic.Int64
				sent atomic.Int64
			}
			trees := make([]*tree, P*4) // RunParallel may start more goroutines than P
			ctx, cancel := context.WithCancel(context.Background())
			var readers sync.WaitGroup
			for j := range trees {
				t := &tree{name: fmt.Sprintf("p%d", j)}
				t.subs = benchSubscribe(b, bus, t.name, S, benchLossless)
				t.read = make([]atomic.Int64, S)
				for k, sub := range t.subs {
					readers.Go(func() {
						for {
							if _, err := sub.Next(ctx); err != nil {
								return
							}
							t.read[k].Add(1)
						}
					})
				}
				trees[j] = t
			}
			var n atomic.Int64
			sample := []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
			metrics.Read(sample)
			waited := sample[0].Value.Float64()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				t := trees[int(n.Add(1)-1)%len(trees)]
				sent := int64(0)
				for pb.Next() {
					benchPublish(b, bus, t.name)
					sent++
				}
				t.sent.Add(sent)
			})
			for _, t := range trees {
				for k := range t.read {
					for t.read[k].Load() < t.sent.Load() {
						runtime.Gosched()
					}
				}
			}
			b.StopTimer()
			metrics.Read(sample)
			b.ReportMetric((sample[0].Value.Float64()-waited)*1e9/float64(b.N), "mutex-wait-ns/op")
			cancel()
			readers.Wait()
		})
	}
}
