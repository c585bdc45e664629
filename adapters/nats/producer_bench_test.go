package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// BenchmarkNATSProducerPublish: the cost of an idempotent producer's stamp
// over NATS, beside BenchmarkNATSSyncPublish/bus-one-node (one node, one
// publisher, one session, each publish waiting for its ack, a live
// subscriber on the node receiving every event). Modes: "plain" is
// Publish without a stamp (one JetStream publish and its ack); "stamped"
// is Publish WithProducer (one atomic batch of the event and the record;
// the node's copy of the record saves the read); "checked" is
// CheckProducer then Publish WithProducer, as the Durable Streams route
// does for a producer's append (one more round trip, the read). Storage:
// one server with memory or file storage, and "r3-file", a 3-server
// cluster with a 3-replica file stream. Run with:
//
//	go test -run '^$' -bench 'NATSProducerPublish' -benchtime 2000x ./adapters/nats/
func BenchmarkNATSProducerPublish(b *testing.B) {
	type target struct {
		name string
		url  func(b *testing.B) string
		opts []rbnats.Option
	}
	one := func(*testing.B) string { return shared.ClientURL() }
	cluster := func(b *testing.B) string {
		cl, err := embedded.RunCluster(3, b.TempDir())
		require.NoError(b, err)
		b.Cleanup(cl.Shutdown)
		return cl.Servers[0].ClientURL()
	}
	targets := []target{
		{"memory", one, []rbnats.Option{rbnats.WithStorage(benchStorages[0].st)}},
		{"file", one, []rbnats.Option{rbnats.WithStorage(benchStorages[1].st)}},
		{"r3-file", cluster, []rbnats.Option{rbnats.WithStorage(benchStorages[1].st), rbnats.WithReplicas(3)}},
	}
	for _, tg := range targets {
		for _, mode := range []string{"plain", "stamped", "checked"} {
			b.Run(mode+"/"+tg.name, func(b *testing.B) {
				pub := newNode(b, tg.url(b), benchCfg, uniqueStream(tg.opts...)...).bus
				require.NoError(b, pub.CreateSession("bench", ""))
				sub, err := pub.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
				require.NoError(b, err)
				defer sub.Close()
				done := make(chan error, 1)
				go subRead(sub, b.N, done)
				p := producer.Stamp{ID: "agent-1", Epoch: 1}
				m := startMeter(b)
				for i := range b.N {
					var err error
					p.Seq = uint64(i)
					switch mode {
					case "plain":
						_, err = pub.Publish("bench", "agent_message_chunk", benchPayload)
					case "checked":
						if err = pub.CheckProducer("bench", p); err == nil {
							_, err = pub.Publish("bench", "agent_message_chunk", benchPayload, eventbus.WithProducer(p))
						}
					default:
						_, err = pub.Publish("bench", "agent_message_chunk", benchPayload, eventbus.WithProducer(p))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				require.NoError(b, <-done)
				m.stop(b, b.N)
			})
		}
	}
}
