package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
)

// BenchmarkNATSSyncPolicy: what syncing every write costs (docs/distributed.md,
// "What an acknowledgement means"). One pipelined publisher (window 256)
// into one session of a stream with three replicas on file storage, on an
// embedded 3-server cluster whose servers sync as the sub-benchmark says
// (default: every 2 minutes; always: before every ack), and a live
// subscriber on the publishing node; a run ends when the subscriber has
// every event. The two policies run side by side in one process:
//
//	go test -run '^$' -bench 'NATSSyncPolicy' -benchtime 20000x -count 6 ./adapters/nats/
func BenchmarkNATSSyncPolicy(b *testing.B) {
	for _, pol := range []struct {
		name string
		cfg  embedded.ClusterConfig
	}{
		{"default", embedded.ClusterConfig{}},
		{"always", embedded.ClusterConfig{SyncAlways: true}},
	} {
		b.Run(pol.name, func(b *testing.B) {
			cfg := pol.cfg
			cfg.Servers, cfg.Dir = 3, b.TempDir()
			cl, err := embedded.StartCluster(cfg)
			require.NoError(b, err)
			defer cl.Shutdown()
			opts := uniqueStream(rbnats.WithReplicas(3), rbnats.WithStorage(jetstream.FileStorage), rbnats.WithPublishTimeout(30*time.Second))
			n := newNode(b, cl.ClientURLs(), benchCfg, opts...)
			sub, err := n.bus.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			pl, err := eventbus.NewPipeline(n.bus, eventbus.PipelineOptions{Window: 256})
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
		})
	}
}
