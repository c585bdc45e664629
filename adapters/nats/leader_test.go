package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// stepDown asks the stream's leader to step down and waits until the
// stream names another one.
func stepDown(t *testing.T, nc *natsgo.Conn, stream string) {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	leader := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return ""
		}
		return s.CachedInfo().Cluster.Leader
	}
	var old string
	require.Eventually(t, func() bool { old = leader(); return old != "" }, 20*time.Second, 20*time.Millisecond)
	m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 5*time.Second)
	require.NoError(t, err)
	var r struct {
		Success bool `json:"success"`
	}
	require.NoError(t, json.Unmarshal(m.Data, &r))
	require.True(t, r.Success, "step-down: %s", m.Data)
	require.Eventually(t, func() bool { l := leader(); return l != "" && l != old }, 20*time.Second, 20*time.Millisecond)
}

// TestStampedPublishesSurviveStepDowns: the stream's leader steps down three
// times while a producer publishes stamped events one after the other. A
// publish in flight to the old leader went unanswered and waited out the
// whole publish timeout, then failed with ErrNoAck (the event maybe
// stored); it is now sent again once the new leader is elected (JetStream
// de-duplicates it), so every publish is acknowledged (stored, or a
// duplicate naming its stored id) and every sequence is stored once. The
// publish timeout is 60 s here: a publish that waited it out would fail the
// test by its error, not by a clock.
func TestStampedPublishesSurviveStepDowns(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	cl, err := embedded.RunCluster(3, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cl.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its servers waits out the publish timeout
	opts := uniqueStream(rbnats.WithReplicas(3), rbnats.WithPublishTimeout(60*time.Second))
	n := newNode(t, cl.ClientURLs(), eventbus.Options{ReplayBufferSize: 10_000}, opts...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	stream := n.be.Stream()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var published int
	var errs []error
	wg.Go(func() {
		for seq := uint64(0); ; seq++ {
			select {
			case <-stop:
				published = int(seq)
				return
			default:
			}
			_, err := stamped(n.bus, "s", producer.Stamp{ID: "p", Epoch: 1, Seq: seq}, fmt.Sprintf(`{"seq":%d}`, seq))
			var pe *producer.Error
			if errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate) && pe.LastID != 0 {
				err = nil // acknowledged: an earlier try was stored, and the record names it
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("seq %d: %w", seq, err))
			}
		}
	})
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		stepDown(t, n.nc, stream)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.Empty(t, errs)
	require.Positive(t, published)

	ids := storedIDs(t, n, "s")
	require.Len(t, ids, published, "every sequence stored once")
	sub, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
	require.NoError(t, err)
	defer sub.Close()
	for want := range published {
		ev := next(t, sub)
		var d struct{ Seq int }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, want, d.Seq, "id %d", ev.ID)
	}
}

// TestSyncPublishSentAgainWhenNoStreamAnswers: a plain publish that no
// stream received while the leader changes (no responders: certainly not
// stored) is sent again after the election instead of failing with
// ErrNoStream. (A plain publish that went unanswered may be stored and is
// not sent again: it fails with ErrNoAck after the publish timeout, which
// a producer stamp avoids.)
func TestSyncPublishSentAgainWhenNoStreamAnswers(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	cl, err := embedded.RunCluster(3, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cl.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its servers waits out the publish timeout
	opts := uniqueStream(rbnats.WithReplicas(3))
	n := newNode(t, cl.ClientURLs(), eventbus.Options{ReplayBufferSize: 10_000}, opts...)
	stream := n.be.Stream()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var noStream, noAck, ok int
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := n.bus.Publish("s", "msg", i)
			switch {
			case err == nil:
				ok++
			case errors.Is(err, rbnats.ErrNoStream):
				noStream++
			case errors.Is(err, rbnats.ErrNoAck):
				noAck++
			default:
				t.Errorf("publish %d: %v", i, err)
			}
		}
	})
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		stepDown(t, n.nc, stream)
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, noStream, "publishes no stream received are sent again")
	assert.Positive(t, ok)
	t.Logf("%d acknowledged, %d unanswered (ErrNoAck)", ok, noAck)
}

// TestReaderResumesWhenConsumerServerDies: a node's consumer has one
// replica, on one server of the stream's, which need not be the server the
// node is connected to. When that server goes away the node's connection
// stays up and nothing tells it; its missed heartbeats do, and it creates
// its consumer again on a server that is up, so a live subscriber of the
// node goes on receiving. (With the old 5 s heartbeat and 5 s creation
// timeout a reader waited 15–30 s; tools/failover measures how long it
// waits now.)
func TestReaderResumesWhenConsumerServerDies(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	cl, err := embedded.RunCluster(3, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cl.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its servers waits out the publish timeout
	opts := uniqueStream(rbnats.WithReplicas(3), rbnats.WithPublishTimeout(10*time.Second))
	cfg := eventbus.Options{ReplayBufferSize: 1000}
	// Node a is connected to server 0 alone; its consumer must be
	// elsewhere: nodes are made until one's consumer is (2 in 3 are).
	var a *node
	var host string
	for range 10 {
		a = newNode(t, cl.Servers[0].ClientURL(), cfg, opts...)
		host = consumerServer(t, a)
		if host != cl.Servers[0].Name() {
			break
		}
		require.NoError(t, a.bus.Close())
	}
	require.NotEqual(t, cl.Servers[0].Name(), host, "no node got its consumer on another server in 10 tries")
	var dead *embedded.Server
	for _, s := range cl.Servers {
		if s.Name() == host {
			dead = s
		}
	}
	// Node b publishes through server 0 too.
	b := newNode(t, cl.Servers[0].ClientURL(), cfg, opts...)
	first := publishRetry(t, b.bus, "s", "before")
	sub, err := a.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: eventbus.At(first - 1)})
	require.NoError(t, err)
	defer sub.Close()
	ids, _ := readIDs(t, sub, 1)
	require.Equal(t, []uint64{first}, ids)

	dead.Stop()
	after := publishRetry(t, b.bus, "s", "after")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		require.NoError(t, err, "the reader on node a hears of nothing after its consumer's server died")
		if ev.ID == after {
			break
		}
	}
	assert.NotEqual(t, host, consumerServer(t, a), "the consumer moved to a server that is up")
}

// consumerServer returns the server that holds the newest consumer of
// node n's stream: n's, when n is the last node made on it (a closed
// node's consumer may linger until its inactivity threshold).
func consumerServer(t *testing.T, n *node) string {
	t.Helper()
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	var server string
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, n.be.Stream())
		if err != nil {
			return false
		}
		var newest time.Time
		lister := s.ListConsumers(ctx)
		for info := range lister.Info() {
			if strings.HasPrefix(info.Name, "replaybus_") && info.Cluster != nil && info.Cluster.Leader != "" && info.Created.After(newest) {
				server, newest = info.Cluster.Leader, info.Created
			}
		}
		return server != ""
	}, 20*time.Second, 50*time.Millisecond, "the node's consumer is listed")
	return server
}
