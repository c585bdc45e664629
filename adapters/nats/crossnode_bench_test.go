package nats_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// BenchmarkNATSCrossNode: an event produced on node A and received on node
// B, flat out. bus: a pipelined publisher (window 256) on node A, a live
// subscriber on node B, two nodes of one stream (each reads the whole
// stream, as every node does); bare: PublishAsync with 256 pending on one
// connection and an ordered consumer (nats.go's, pull) on another; bare-2:
// the same plus a second ordered consumer on the publishing connection, the
// bus's topology (node A reads the stream too); bare-push and bare-push-2:
// bare and bare-2 with push consumers (flow control, idle heartbeats), as a
// node reads the stream; bare-shared: one push consumer whose deliveries
// both connections receive (one consumer for two readers). Every row times
// from the first publish to the receiver (node B, the other connection's
// consumer) holding every event, after every ack.
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
		for _, two := range []bool{false, true} {
			name := "bare-push/"
			if two {
				name = "bare-push-2/"
			}
			b.Run(name+sto.name, func(b *testing.B) { crossNodePush(b, sto.st, two) })
		}
		b.Run("bare-shared/"+sto.name, func(b *testing.B) { crossNodeShared(b, sto.st) })
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
	m := startMeter(b)
	x.publishAll(b)
	require.NoError(b, <-done)
	m.stop(b, b.N)
}

// crossNodePush is crossNodeBare with push consumers, as a node reads
// the stream: nats.go's PushConsumer.Consume of a consumer delivering to
// an inbox, with flow control and idle heartbeats (the node's settings),
// on the receiving connection; two adds one on the publishing connection.
func crossNodePush(b *testing.B, st jetstream.StorageType, two bool) {
	x := newBare(b, st, 256)
	var got atomic.Int64
	done := make(chan error, 1)
	n := int64(b.N)
	conns := []jetstream.JetStream{x.recv}
	if two {
		pub, err := jetstream.New(x.pubNC)
		require.NoError(b, err)
		conns = append(conns, pub)
	}
	for i, js := range conns {
		nc := x.recvNC
		if i == 1 {
			nc = x.pubNC
		}
		c, err := js.CreateOrUpdatePushConsumer(context.Background(), x.stream.CachedInfo().Config.Name, jetstream.ConsumerConfig{
			DeliverSubject: nc.NewInbox(), DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckNonePolicy,
			MemoryStorage: true, Replicas: 1, FlowControl: true, IdleHeartbeat: time.Second,
		})
		require.NoError(b, err)
		cc, err := c.Consume(func(jetstream.Msg) {
			if i == 0 && got.Add(1) == n {
				done <- nil
			}
		})
		require.NoError(b, err)
		b.Cleanup(cc.Stop)
	}
	m := startMeter(b)
	x.publishAll(b)
	waitReceived(b, done, &got, n)
	m.stop(b, b.N)
}

// crossNodeShared is bare JetStream reading the stream once for both
// connections: one push consumer (no acks, new messages) delivering to a
// subject that the publishing and the receiving connection both subscribe
// to, so the server runs one consumer and fans each message out to two
// clients. It is the cheapest way for two nodes to both see every event
// (what a bus of two nodes needs), the bound of a design with one shared
// consumer instead of one per node; a bound only, not a robust reader (no
// flow control, no heartbeats, no way for one reader to rewind).
func crossNodeShared(b *testing.B, st jetstream.StorageType) {
	x := newBare(b, st, 256)
	deliver := "deliver." + x.prefix
	var got atomic.Int64
	done := make(chan error, 1)
	n := int64(b.N)
	for i, nc := range []*natsgo.Conn{x.pubNC, x.recvNC} {
		sub, err := nc.Subscribe(deliver, func(*natsgo.Msg) {
			if i == 1 && got.Add(1) == n {
				done <- nil
			}
		})
		require.NoError(b, err)
		require.NoError(b, sub.SetPendingLimits(-1, -1))
		require.NoError(b, nc.Flush())
	}
	_, err := x.pub.CreateOrUpdatePushConsumer(context.Background(), x.stream.CachedInfo().Config.Name, jetstream.ConsumerConfig{
		DeliverSubject: deliver, DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, Replicas: 1,
	})
	require.NoError(b, err)
	m := startMeter(b)
	x.publishAll(b)
	waitReceived(b, done, &got, n)
	m.stop(b, b.N)
}
