package nats_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// publishRetry publishes one event, retrying for up to 20 s while the
// NATS side recovers; it returns the id.
func publishRetry(t testing.TB, b *eventbus.Bus, session string, data any) uint64 {
	t.Helper()
	var (
		mu   sync.Mutex // the condition runs on assert.Eventually's goroutine
		id   uint64
		last error
	)
	// Callers run it on goroutines of their own too: assert (report and
	// return 0, no event has id 0), not require (t.FailNow).
	ok := assert.Eventually(t, func() bool {
		ev, err := b.Publish(session, "msg", data)
		mu.Lock()
		defer mu.Unlock()
		id, last = ev.ID, err
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !ok {
		t.Errorf("publish still failing after 20s: %v", last)
		return 0
	}
	return id
}

// resumes counts the resubscribes of resumeUntil.
var resumes atomic.Int64

// resumeUntil reads sub until it has every id of want, resubscribing on
// n with the last id whenever the subscription ends with a backend error.
// It returns every id it read, in order.
func resumeUntil(t testing.TB, n *node, session string, sub *eventbus.Subscription, got []uint64, want func() []uint64) []uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := want()
		if len(got) > 0 && len(w) > 0 && got[len(got)-1] >= w[len(w)-1] {
			return got
		}
		require.True(t, time.Now().Before(deadline), "timed out; got %d ids", len(got))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ev, err := sub.Next(ctx)
		cancel()
		switch {
		case err == nil && ev.ID != 0:
			got = append(got, ev.ID)
		case err == nil:
			require.NotEqual(t, frame.TypeStateResyncRequired, ev.Type, "unexpected resync: %s", ev.Data)
		case errors.Is(err, context.DeadlineExceeded):
		default:
			require.ErrorIs(t, err, eventbus.ErrBackend)
			t.Logf("resuming after: %v", err)
			resumes.Add(1)
			o := eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: n.bus.Epoch()}}
			if len(got) > 0 {
				o.Cursor.ID = got[len(got)-1]
			}
			sub.Close()
			sub, err = n.bus.Subscribe(context.Background(), session, o)
			require.NoError(t, err)
		}
	}
}

// TestServerRestart: with file storage, the embedded server restarts in
// the middle of a stream; the node's subscriptions end with ErrBackend, and
// resumes after it returns lose nothing. A wiped stream then gives
// epoch_reset on a new node, and the old node reports ErrStreamLost.
func TestServerRestart(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	dir := t.TempDir()
	srv, err := embedded.RunServer(embedded.ServerConfig{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its server waits out the publish timeout
	cfg := eventbus.Options{ReplayBufferSize: 1000}
	opts := uniqueStream(rbnats.WithStorage(jetstream.FileStorage), rbnats.WithPublishTimeout(time.Second))
	pub := newNode(t, srv.ClientURL(), cfg, opts...)
	reader := newNode(t, srv.ClientURL(), cfg, opts...)
	epoch := pub.bus.Epoch()

	var (
		mu    sync.Mutex
		acked []uint64
	)
	ackedIDs := func() []uint64 { mu.Lock(); defer mu.Unlock(); return append([]uint64(nil), acked...) }
	const total = 300
	restarted := make(chan struct{})
	go func() {
		for i := 0; i < total; i++ {
			if i == total/2 {
				require.NoError(t, srv.Restart())
				close(restarted)
			}
			id := publishRetry(t, pub.bus, "s", i)
			mu.Lock()
			acked = append(acked, id)
			mu.Unlock()
		}
	}()
	sub, err := reader.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	got := resumeUntil(t, reader, "s", sub, nil, func() []uint64 {
		select {
		case <-restarted:
		default:
			return []uint64{^uint64(0)} // keep reading
		}
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < total {
			return []uint64{^uint64(0)}
		}
		return acked
	})
	assert.NotZero(t, resumes.Load(), "the restart ended the subscription")
	checkStrict(t, got)
	in := map[uint64]bool{}
	for _, id := range got {
		in[id] = true
	}
	for _, id := range ackedIDs() {
		require.True(t, in[id], "acked id %d never delivered", id)
	}
	assert.Equal(t, epoch, pub.bus.Epoch(), "same stream, same epoch after restart")
	late := newNode(t, srv.ClientURL(), cfg, opts...)
	assert.Equal(t, epoch, late.bus.Epoch(), "a node started after the restart has the same epoch")

	// Wipe the stream's storage: a new stream, a new epoch.
	srv.Stop()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, srv.Restart())
	fresh := newNode(t, srv.ClientURL(), cfg, opts...)
	assert.NotEqual(t, epoch, fresh.bus.Epoch())
	last := got[len(got)-1]
	for _, o := range []eventbus.SubscribeOptions{
		{Cursor: &eventbus.Position{ID: last, Epoch: epoch}}, // header clients send the epoch
		{Cursor: eventbus.At(last)},                          // browsers only the id
	} {
		s, err := fresh.bus.Subscribe(context.Background(), "s", o)
		require.NoError(t, err)
		ev := next(t, s)
		assert.Equal(t, frame.TypeStateResyncRequired, ev.Type)
		assert.Contains(t, string(ev.Data), frame.ReasonEpochReset)
		s.Close()
	}
	// The old node notices its stream is gone: publishes fail.
	require.Eventually(t, func() bool {
		_, err := reader.bus.Publish("s", "msg", 1)
		return errors.Is(err, rbnats.ErrStreamLost)
	}, 20*time.Second, 50*time.Millisecond)
}

// TestCluster: a 3-server NATS cluster with a 3-replica stream; one server
// is stopped; publishing and resuming continue on the others.
func TestCluster(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	if testing.Short() {
		t.Skip("cluster test")
	}
	cl, err := embedded.RunCluster(3, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cl.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its servers waits out the publish timeout
	cfg := eventbus.Options{ReplayBufferSize: 1000}
	opts := uniqueStream(rbnats.WithReplicas(3), rbnats.WithPublishTimeout(2*time.Second))
	// Each node prefers its own server.
	urls := make([]string, 3)
	for i, s := range cl.Servers {
		urls[i] = s.ClientURL()
	}
	nodeOn := func(i int) *node {
		list := urls[i]
		for j := range urls {
			if j != i {
				list += "," + urls[j]
			}
		}
		return newNodeOpts(t, list, cfg, []natsgo.Option{natsgo.DontRandomize()}, opts...)
	}
	a, b, c := nodeOn(0), nodeOn(1), nodeOn(2)
	assert.Equal(t, a.bus.Epoch(), b.bus.Epoch(), "one epoch across the cluster")
	assert.Equal(t, a.bus.Epoch(), c.bus.Epoch(), "one epoch across the cluster")

	var acked []uint64
	for i := 0; i < 50; i++ {
		acked = append(acked, publishRetry(t, a.bus, "s", i))
	}
	sub, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	got, _ := readIDs(t, sub, 25)
	sub.Close()

	cl.Servers[1].Stop() // node b's server
	for i := 50; i < 100; i++ {
		acked = append(acked, publishRetry(t, a.bus, "s", i))
	}
	// Resume on c with the last id read on b: exactly the rest.
	res, err := c.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: got[len(got)-1], Epoch: b.bus.Epoch()}})
	require.NoError(t, err)
	got = resumeUntil(t, c, "s", res, got, func() []uint64 { return acked })
	assert.Equal(t, acked, got)
	// b moved to another server and catches up too.
	res2, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: eventbus.At(acked[10])})
	require.NoError(t, err)
	got2 := resumeUntil(t, b, "s", res2, acked[:11], func() []uint64 { return acked })
	assert.Equal(t, acked, got2)
	for i := 0; i < 10; i++ {
		publishRetry(t, b.bus, "s", i)
	}
}

// TestConsumerResumesAtOnceAfterServerRestart (issue 18.6): the NATS
// server restarts on the same address with its data; the node reconnects
// and re-creates its consumer as soon as the connection is back, not after
// two missed consumer heartbeats. With a 30 s heartbeat the old way took a
// minute before an event published after the restart reached a subscriber
// of the node; it must arrive well within one heartbeat.
func TestConsumerResumesAtOnceAfterServerRestart(t *testing.T) {
	srv, err := embedded.RunServer(embedded.ServerConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its server waits out the publish timeout
	const heartbeat = 30 * time.Second
	n := newNode(t, srv.ClientURL(), eventbus.Options{},
		uniqueStream(rbnats.WithStorage(jetstream.FileStorage), rbnats.WithHeartbeat(heartbeat))...)
	before := publishRetry(t, n.bus, "s", 1)
	syncNode(t, n.bus) // bounded: 20 s

	require.NoError(t, srv.Restart())
	require.Eventually(t, n.nc.IsConnected, 20*time.Second, 10*time.Millisecond, "the node reconnects by itself")
	sub, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: before, Epoch: n.bus.Epoch()}})
	require.NoError(t, err)
	defer sub.Close()
	after := publishRetry(t, n.bus, "s", 2)
	ctx, cancel := context.WithTimeout(context.Background(), heartbeat/2)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		require.NoError(t, err, "the event published after the restart did not arrive within half a heartbeat")
		if ev.ID == after {
			break
		}
		require.True(t, ev.ID == 0, "unexpected event %d", ev.ID)
	}
}

// TestReadyFollowsTheConnection (issue 18.6): Backend.Ready is nil while the
// node's connection is up, ErrDisconnected while its server is away, nil
// again once the node reconnected by itself, and ErrClosed after Close.
func TestReadyFollowsTheConnection(t *testing.T) {
	srv, err := embedded.RunServer(embedded.ServerConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Shutdown()
	n := newNode(t, srv.ClientURL(), eventbus.Options{}, uniqueStream(rbnats.WithStorage(jetstream.FileStorage))...)
	require.NoError(t, n.be.Ready())

	srv.Stop()
	require.Eventually(t, func() bool { return errors.Is(n.be.Ready(), rbnats.ErrDisconnected) }, 10*time.Second, 5*time.Millisecond)
	assert.Contains(t, n.be.Ready().Error(), "reconnecting")
	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return n.be.Ready() == nil }, 20*time.Second, 5*time.Millisecond, "ready again after the reconnect")
	publishRetry(t, n.bus, "s", 1)

	require.NoError(t, n.bus.Close())
	assert.ErrorIs(t, n.be.Ready(), eventbus.ErrClosed)
}
