package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// BenchmarkNATSCrossNode: an event produced on node A and received on node
// B, flat out. bus: a pipelined publisher (window 256) on node A, a live
// subscriber on node B, two nodes of one stream (each reads the whole
// stream, as every node does); bare: PublishAsync with 256 pending on one
// connection and an ordered consumer on another; bare-2: the same plus a
// second ordered consumer on the publishing connection, the bus's topology
// (node A reads the stream too). A run ends when the receiver (node B, the
// other connection's consumer) holds every event.
//
//	go test -run '^$' -bench 'NATSCrossNode' -benchtime 20000x -count 8 ./adapters/nats/
func BenchmarkNATSCrossNode(b *testing.B) {
	for _, sto := range benchStorages {
		b.Run("bus/"+sto.name, func(b *testing.B) {
			a, c := busNodes(b, sto.st)
			sub, err := c.Subscribe(context.Background(), "bench", eventbus.SubscribeOptions{NoReplay: true})
			require.NoError(b, err)
			defer sub.Close()
			pl, err := eventbus.NewPipeline(a, eventbus.PipelineOptions{Window: 256})
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
		for _, two := range []bool{false, true} {
			name := "bare/"
			if two {
				name = "bare-2/"
			}
			b.Run(name+sto.name, func(b *testing.B) { crossNodeBare(b, sto.st, two) })
		}
	}
}

// crossNodeBare is BenchmarkNATSCrossNode's bare JetStream; two adds a
// consumer on the publishing connection.
func crossNodeBare(b *testing.B, st jetstream.StorageType, two bool) {
	x := newBare(b, st, 256)
	done := make(chan error, 1)
	x.consume(b, b.N, done)
	if two {
		c, err := x.stream.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		require.NoError(b, err)
		// The consumer sits on its own jetstream handle of the
		// publishing connection, as a node's consumer shares the
		// node's connection with its publishes.
		cc, err := c.Consume(func(jetstream.Msg) {})
		require.NoError(b, err)
		b.Cleanup(cc.Stop)
	}
	subj := x.prefix + ".bench"
	m := startMeter(b)
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
	require.NoError(b, <-done)
	m.stop(b, b.N)
}
