package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The NATS benchmarks run the bus ("bus") beside bare JetStream ("bare")
// in one run, each on memory and file storage, on the shared embedded
// server (in this process, so the CPU figures include the server):
//
//	go test -run '^$' -bench 'NATS' -benchtime 5000x ./adapters/nats/
//
// "bare" is the fastest correct usage of nats.go alone for the same job:
// the same 200-byte payload published to one subject per session of a
// stream with the same limits (jetstream.Publish for a sync row,
// PublishAsync with 256 pending for a pipelined one), received by an
// ordered consumer (one per subscriber, on another connection) through
// Consume; a row ends when every consumer has every message, as a bus row
// ends when every subscriber has every event.
// Every benchmark op is one event; besides ns/op and allocs/op (every
// goroutine: publisher, server, consumer) each reports events/s and
// cpu-µs/event (process CPU time, user + system, per event).

// benchPayload is an ACP session/update agent_message_chunk of about 200
// bytes, the commonest event of an agent server.
var benchPayload = json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
	strings.Repeat("lorem ipsum ", 12) + `"}}`)

var benchCfg = eventbus.Options{MaxQueueSize: 1_000_000, MaxQueuedBytes: 1 << 30}

var benchStorages = []struct {
	name string
	st   jetstream.StorageType
}{{"memory", jetstream.MemoryStorage}, {"file", jetstream.FileStorage}}

// cpuNow returns the process's CPU time so far (user + system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// meter reports events/s and cpu-µs/event for n events since start.
type meter struct{ cpu time.Duration }

func startMeter(b *testing.B) meter {
	b.ReportAllocs()
	b.ResetTimer()
	return meter{cpu: cpuNow()}
}

func (m meter) stop(b *testing.B, n int) {
	b.StopTimer()
	cpu := cpuNow() - m.cpu
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/event")
}

// bare is plain JetStream: a stream configured as the bus's, a publishing
// connection and a receiving one.
type bare struct {
	pub, recv     jetstream.JetStream
	stream        jetstream.Stream
	prefix        string
	pubNC, recvNC *natsgo.Conn
}

func newBare(b *testing.B, st jetstream.StorageType, asyncPending int) *bare {
	n := streamSeq.Add(1)
	x := &bare{prefix: fmt.Sprintf("bare%d", n)}
	var err error
	x.pubNC, err = natsgo.Connect(shared.ClientURL())
	require.NoError(b, err)
	x.recvNC, err = natsgo.Connect(shared.ClientURL())
	require.NoError(b, err)
	b.Cleanup(func() { x.pubNC.Close(); x.recvNC.Close() })
	x.pub, err = jetstream.New(x.pubNC, jetstream.WithPublishAsyncMaxPending(asyncPending))
	require.NoError(b, err)
	x.recv, err = jetstream.New(x.recvNC)
	require.NoError(b, err)
	x.stream, err = x.pub.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: fmt.Sprintf("BARE%d", n), Subjects: []string{x.prefix + ".>"},
		MaxMsgsPerSubject: int64(rbnats.DefaultRetention * eventbus.Options{}.WithDefaults().ReplayBufferSize),
		Storage:           st, Discard: jetstream.DiscardOld,
	})
	require.NoError(b, err)
	return x
}

// publishAll publishes b.N events of benchPayload to the bench subject,
// pipelined up to the async window, and waits (at most 30 s) until every
// one is acknowledged.
func (x *bare) publishAll(b *testing.B) {
	subj := x.prefix + ".bench"
	for range b.N {
		if _, err := x.pub.PublishAsync(subj, benchPayload, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-x.pub.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		b.Fatal("async publishes not acknowledged")
	}
}

// waitReceived waits (at most 30 s) for done, naming how many of n events
// got counted if it does not come.
func waitReceived(b *testing.B, done <-chan error, got *atomic.Int64, n int64) {
	select {
	case err := <-done:
		require.NoError(b, err)
	case <-time.After(30 * time.Second):
		b.Fatalf("received %d of %d", got.Load(), n)
	}
}

// consume starts an ordered consumer of new messages on the receiving
// connection, which reports on done once it has received n. It uses
// nats.go's callback API (Consume), the cheaper of its two: the iterator
// (Messages, Next) costs 0.5–1.5 µs and 4 allocations more per message,
// its Next arming a heartbeat timer per call.
//
// A consumer that falls more than the stream's per-subject limit behind
// loses messages without a word (JetStream deletes them unread), so the
// consumer also reports, once 30 s have passed without a message, how
// many it got: the benchmark fails instead of waiting forever.
func (x *bare) consume(b *testing.B, n int, done chan<- error) {
	// On the receiving connection (x.stream was made through the
	// publishing one, whose consumers would share its socket with the
	// publishes: until issue 32 they did, against this comment).
	c, err := x.recv.OrderedConsumer(context.Background(), x.stream.CachedInfo().Config.Name,
		jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	require.NoError(b, err)
	var got atomic.Int64
	cc, err := c.Consume(func(jetstream.Msg) {
		if got.Add(1) == int64(n) {
			done <- nil
		}
	})
	require.NoError(b, err)
	b.Cleanup(cc.Stop)
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	go func() {
		last := int64(-1)
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Second):
			}
			k := got.Load()
			if k >= int64(n) {
				return
			}
			if k == last {
				done <- fmt.Errorf("bare consumer got %d of %d messages (lost: it fell behind the stream's per-subject limit)", k, n)
				return
			}
			last = k
		}
	}()
}

// reportStored reports the stream's storage per message it holds
// (stored-B/event), as JetStream accounts it.
func reportStored(b *testing.B, nc *natsgo.Conn, stream string) {
	js, err := jetstream.New(nc)
	require.NoError(b, err)
	st, err := js.Stream(context.Background(), stream)
	require.NoError(b, err)
	info, err := st.Info(context.Background())
	require.NoError(b, err)
	if info.State.Msgs > 0 {
		b.ReportMetric(float64(info.State.Bytes)/float64(info.State.Msgs), "stored-B/event")
	}
}

// busNodes returns two bus nodes of one fresh stream.
func busNodes(b *testing.B, st jetstream.StorageType) (a, c *eventbus.Bus) {
	opts := uniqueStream(rbnats.WithStorage(st))
	return newNode(b, shared.ClientURL(), benchCfg, opts...).bus, newNode(b, shared.ClientURL(), benchCfg, opts...).bus
}

// subRead reads n real events from s, then reports on done; a
// resync frame (events lost: the node fell behind the stream's retention)
// ends it with an error rather than a wait for events that never come.
func subRead(s *eventbus.Subscription, n int, done chan<- error) {
	for got := 0; got < n; {
		ev, err := s.Next(context.Background())
		if err != nil {
			done <- err
			return
		}
		if ev.Type == frame.TypeStateResyncRequired {
			done <- fmt.Errorf("after %d of %d events: %s %s", got, n, ev.Type, ev.Data)
			return
		}
		if ev.ID != 0 {
			got++
		}
	}
	done <- nil
}

// BenchmarkNATSSyncPublish: one publisher, each publish waiting for its
// ack, into one session; a live subscriber on another node (bare: an
// ordered consumer on another connection) receives every event before the
// benchmark ends.
func BenchmarkNATSSyncPublish(b *testing.B) {
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			pub, recv := busNodes(b, sto.st)
			sub, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			done := make(chan error, 1)
			go subRead(sub, b.N, done)
			m := startMeter(b)
			for range b.N {
				if _, err := pub.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			m.stop(b, b.N)
		})
		// One node: the subscriber on the publishing node, so one consumer
		// as in the bare row (like for like).
		b.Run("bus-one-node/"+sto.name, func(b *testing.B) {
			pub := newNode(b, shared.ClientURL(), benchCfg, uniqueStream(rbnats.WithStorage(sto.st))...).bus
			sub, err := pub.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			done := make(chan error, 1)
			go subRead(sub, b.N, done)
			m := startMeter(b)
			for range b.N {
				if _, err := pub.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			m.stop(b, b.N)
		})
		b.Run("bare/"+sto.name, func(b *testing.B) {
			x := newBare(b, sto.st, 256)
			done := make(chan error, 1)
			x.consume(b, b.N, done)
			subj := x.prefix + ".bench"
			m := startMeter(b)
			for range b.N {
				if _, err := x.pub.Publish(context.Background(), subj, benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			m.stop(b, b.N)
		})
	}
}

// BenchmarkNATSSyncPublish16: 16 publishers, one session each, each
// publish waiting for its ack; one subscriber of every session (scope
// all) on another node receives them all.
func BenchmarkNATSSyncPublish16(b *testing.B) {
	const publishers = 16
	run := func(b *testing.B, publish func(w int) error, wait func() error) {
		m := startMeter(b)
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(b.N))
		for w := range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := publish(w); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(b, wait())
		m.stop(b, b.N)
	}
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			pub, recv := busNodes(b, sto.st)
			sub, err := recv.Subscribe(context.Background(), "any", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			done := make(chan error, 1)
			go subRead(sub, b.N, done)
			run(b, func(w int) error {
				_, err := pub.Publish(fmt.Sprintf("s%d", w), "agent_message_chunk", benchPayload)
				return err
			}, func() error { return <-done })
		})
		b.Run("bare/"+sto.name, func(b *testing.B) {
			x := newBare(b, sto.st, 256)
			done := make(chan error, 1)
			x.consume(b, b.N, done)
			run(b, func(w int) error {
				_, err := x.pub.Publish(context.Background(), fmt.Sprintf("%s.s%d", x.prefix, w), benchPayload)
				return err
			}, func() error { return <-done })
		})
	}
}

// BenchmarkNATSPipelined: one publisher into one session with 256 acks in
// flight (bus: eventbus.Pipeline; bare: PublishAsync with 256 pending),
// and a subscriber on the publishing node itself (bare: an ordered
// consumer), so the figure includes the node ingesting its own events.
func BenchmarkNATSPipelined(b *testing.B) {
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			n := newNode(b, shared.ClientURL(), benchCfg, uniqueStream(rbnats.WithStorage(sto.st))...)
			pub := n.bus
			sub, err := pub.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			pl, err := eventbus.NewPipeline(pub, eventbus.PipelineOptions{Window: 256})
			require.NoError(b, err)
			done := make(chan error, 1)
			go subRead(sub, b.N, done)
			m := startMeter(b)
			for range b.N {
				if err := pl.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, pl.Flush(context.Background()))
			require.NoError(b, <-done)
			m.stop(b, b.N)
			reportStored(b, n.nc, n.be.Stream())
		})
		b.Run("bare/"+sto.name, func(b *testing.B) {
			x := newBare(b, sto.st, 256)
			done := make(chan error, 1)
			x.consume(b, b.N, done)
			m := startMeter(b)
			x.publishAll(b)
			require.NoError(b, <-done)
			m.stop(b, b.N)
			reportStored(b, x.pubNC, x.stream.CachedInfo().Config.Name)
		})
	}
}

// BenchmarkNATSLatency: publish→receive latency at 1,000 events/s (one
// publish per millisecond tick, each waiting for its ack), from the start
// of the publish on one node to the subscriber on another node holding the
// event. Reports p50-µs and p99-µs.
func BenchmarkNATSLatency(b *testing.B) {
	run := func(b *testing.B, publish func() error, arrived <-chan time.Time) {
		lat := make([]time.Duration, 0, b.N)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		m := startMeter(b)
		for range b.N {
			<-tick.C
			t0 := time.Now()
			if err := publish(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, (<-arrived).Sub(t0))
		}
		m.stop(b, b.N)
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			pub, recv := busNodes(b, sto.st)
			sub, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			arrived := make(chan time.Time, 1)
			go func() {
				for {
					if _, err := sub.Next(context.Background()); err != nil {
						return
					}
					arrived <- time.Now()
				}
			}()
			run(b, func() error {
				_, err := pub.Publish("bench", "agent_message_chunk", benchPayload)
				return err
			}, arrived)
		})
		b.Run("bare/"+sto.name, func(b *testing.B) {
			x := newBare(b, sto.st, 256)
			arrived := make(chan time.Time, 1)
			c, err := x.stream.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
			require.NoError(b, err)
			cc, err := c.Consume(func(jetstream.Msg) { arrived <- time.Now() })
			require.NoError(b, err)
			defer cc.Stop()
			subj := x.prefix + ".bench"
			run(b, func() error {
				_, err := x.pub.Publish(context.Background(), subj, benchPayload)
				return err
			}, arrived)
		})
	}
}

// BenchmarkNATSFanout10: one publisher flat out (pipelined, 256 in flight)
// into one session, 10 subscribers of it on another node (bare: 10 ordered
// consumers on another connection). Reports received/s (all subscribers
// together), lost (events published that a subscriber never got, summed)
// and, for the bus, gaps (feed_gap frames announcing them).
func BenchmarkNATSFanout10(b *testing.B) {
	const subscribers = 10
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			opts := uniqueStream(rbnats.WithStorage(sto.st))
			pub := newNode(b, shared.ClientURL(), benchCfg, opts...).bus
			rn := newNode(b, shared.ClientURL(), benchCfg, opts...)
			recv := rn.bus
			// The receiving node's lag: acknowledged ids it has not
			// ingested yet, sampled every 200 µs.
			var acked atomic.Uint64
			pl, err := eventbus.NewPipeline(pub, eventbus.PipelineOptions{Window: 256, OnStored: func(ev eventbus.Event) { acked.Store(ev.ID) }})
			require.NoError(b, err)
			var maxLag atomic.Int64
			stopLag := make(chan struct{})
			lagDone := make(chan struct{})
			go func() {
				defer close(lagDone)
				t := time.NewTicker(200 * time.Microsecond)
				defer t.Stop()
				for {
					select {
					case <-stopLag:
						return
					case <-t.C:
						if lag := int64(acked.Load()) - int64(rn.be.Ingested()); lag > maxLag.Load() {
							maxLag.Store(lag)
						}
					}
				}
			}()
			var lost, gaps atomic.Int64
			var wg sync.WaitGroup
			for range subscribers {
				s, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
				require.NoError(b, err)
				defer s.Close()
				wg.Add(1)
				go func() {
					defer wg.Done()
					got := 0
					for {
						ev, err := s.Next(context.Background())
						if err != nil {
							return
						}
						switch {
						case ev.ID == 0:
							gaps.Add(1)
						case ev.Type == "bench_end":
							lost.Add(int64(b.N - got))
							return
						default:
							got++
						}
					}
				}()
			}
			m := startMeter(b)
			for range b.N {
				if err := pl.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			// One more event marks the end (not counted as published).
			require.NoError(b, pl.Publish("bench", "bench_end", nil))
			require.NoError(b, pl.Flush(context.Background()))
			wg.Wait()
			close(stopLag)
			<-lagDone
			b.ReportMetric(float64(maxLag.Load()), "max-lag-events")
			m.stop(b, b.N)
			b.ReportMetric(float64(subscribers*b.N-int(lost.Load()))/b.Elapsed().Seconds(), "received/s")
			b.ReportMetric(float64(lost.Load()), "lost")
			b.ReportMetric(float64(gaps.Load()), "gaps")
		})
		b.Run("bare/"+sto.name, func(b *testing.B) {
			x := newBare(b, sto.st, 256)
			done := make(chan error, subscribers)
			for range subscribers {
				x.consume(b, b.N, done)
			}
			m := startMeter(b)
			x.publishAll(b)
			for range subscribers {
				require.NoError(b, <-done)
			}
			m.stop(b, b.N)
			b.ReportMetric(float64(subscribers*b.N)/b.Elapsed().Seconds(), "received/s")
			b.ReportMetric(0, "lost")
		})
	}
}
