package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// BenchmarkPublishToReceive publishes b.N events one after the other on one
// bus (node) and receives them on a live subscriber of another node (the
// same bus for memory). ns/op is the publish call (for NATS: until
// JetStream's ack); p50-µs and p99-µs are publish-to-receive latencies.
func BenchmarkPublishToReceive(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			pub, recv := benchBuses(b, kind)
			sub, err := recv.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			starts := make([]time.Time, b.N)
			ids := make([]uint64, b.N)
			got := make([]time.Time, 0, b.N)
			done := make(chan error, 1)
			go func() {
				for len(got) < b.N {
					ev, err := sub.Next(context.Background())
					if err != nil {
						done <- err
						return
					}
					got = append(got, time.Now())
					_ = ev
				}
				done <- nil
			}()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				starts[i] = time.Now()
				ev, err := pub.Publish("bench", "agent_message_chunk", benchPayload)
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = ev.ID
			}
			require.NoError(b, <-done)
			b.StopTimer()
			lat := make([]time.Duration, b.N)
			for i := range lat {
				lat[i] = got[i].Sub(starts[i])
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkPublishParallel is publish throughput with concurrent publishers
// (GOMAXPROCS goroutines, one session each), no subscriber.
func BenchmarkPublishParallel(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			pub, _ := benchBuses(b, kind)
			var n int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				session := fmt.Sprintf("p%d", time.Now().UnixNano()+n)
				n++
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
