package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// benchPayload is an ACP session/update agent_message_chunk of about 200
// bytes, the commonest event of an agent server.
var benchPayload = json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
	strings.Repeat("lorem ipsum ", 12) + `"}}`)

var benchCfg = config.Config{MaxQueueSize: config.MaxCount, MaxQueuedBytes: config.MaxBytes}

// benchBuses returns the publishing and the receiving bus of one kind:
// the same in-memory bus, or two NATS nodes on the shared embedded server.
func benchBuses(b *testing.B, kind string) (pub, recv *eventbus.Bus) {
	switch kind {
	case "memory":
		bus, err := eventbus.New(benchCfg)
		require.NoError(b, err)
		b.Cleanup(func() { _ = bus.Close() })
		return bus, bus
	case "nats-memory", "nats-file":
		st := jetstream.MemoryStorage
		if kind == "nats-file" {
			st = jetstream.FileStorage
		}
		opts := uniqueStream(rbnats.WithStorage(st))
		return newNode(b, shared.ClientURL(), benchCfg, opts...).bus, newNode(b, shared.ClientURL(), benchCfg, opts...).bus
	}
	panic(kind)
}

var benchKinds = []string{"memory", "nats-memory", "nats-file"}

// BenchmarkPublish publishes b.N events one after the other on one bus
// (node) while a live subscriber on another node (the same bus for memory)
// receives them; it ends when the last one has arrived. ns/op is the
// publish call (for NATS: until JetStream's ack); events/s counts events
// published and delivered.
func BenchmarkPublish(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			pub, recv := benchBuses(b, kind)
			sub, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if _, err := sub.Next(context.Background()); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := pub.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkLatency measures publish-to-receive latency one event at a time
// (the next publish waits for the previous event to arrive): from the start
// of Publish on one node to the subscriber on another node (the same bus
// for memory) holding the event. It reports p50-µs and p99-µs.
func BenchmarkLatency(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			pub, recv := benchBuses(b, kind)
			sub, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			arrived := make(chan time.Time)
			go func() {
				defer close(arrived)
				for {
					if _, err := sub.Next(context.Background()); err != nil {
						return
					}
					arrived <- time.Now()
				}
			}()
			lat := make([]time.Duration, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				if _, err := pub.Publish("bench", "agent_message_chunk", benchPayload); err != nil {
					b.Fatal(err)
				}
				lat[i] = (<-arrived).Sub(t0)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// BenchmarkPublishParallel is publish throughput with 8×GOMAXPROCS
// concurrent publishers (one session each), no subscriber: NATS publishes
// wait for their ack, so throughput comes from having many in flight.
func BenchmarkPublishParallel(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			pub, _ := benchBuses(b, kind)
			var n atomic.Int64
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				session := fmt.Sprintf("p%d", n.Add(1))
				for pb.Next() {
					if _, err := pub.Publish(session, "agent_message_chunk", benchPayload); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
