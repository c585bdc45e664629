package e2e

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
)

// TestDurableClientResumesAcrossRestartOverNATS: the agent server runs
// over NATS JetStream, whose history and epoch outlive it. npm
// @durable-streams/client tails a session holding ids 1…10 (long-poll);
// the agent server restarts on the same address (a new bus node over the
// same JetStream, a new Durable Streams handler that has never seen the
// stream), and Go publishes 11…20. The client's next read carries its
// offset of the same epoch: it resumes exactly there and ends with ids
// 1…20, each once, in order.
func TestDurableClientResumesAcrossRestartOverNATS(t *testing.T) {
	node, dir := needDurableDeps(t)
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer ns.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := func(addr string) (*eventbus.Bus, *httptest.Server, chan string) {
		bus, err := rbnats.Connect(ctx, ns.ClientURL(), eventbus.Options{ReplayBufferSize: 1000})
		require.NoError(t, err)
		ts, offsets := startDurableServer(t, bus, addr)
		return bus, ts, offsets
	}
	bus1, ts1, live1 := start("")
	require.NoError(t, bus1.CreateSession("run", ""))
	var last eventbus.Event
	var ids []uint64
	for i := 1; i <= 10; i++ {
		last, err = bus1.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, last.ID)
	}
	tail := durable.FormatOffset(eventbus.Position{ID: last.ID, Epoch: bus1.Epoch()})

	out, stderr := runDurableClient(ctx, t, node, dir, ts1.URL+durable.Pattern+"run", 20, "long-poll")
	for off := range live1 {
		if off == tail {
			break // the client tails the stream after the 10th event
		}
	}
	addr := ts1.Listener.Addr().String()
	ts1.CloseClientConnections()
	ts1.Close()
	require.NoError(t, bus1.Close())

	bus2, ts2, _ := start(addr)
	defer ts2.Close()
	defer bus2.Close()
	require.Equal(t, bus1.Epoch(), bus2.Epoch(), "JetStream keeps the epoch")
	for i := 11; i <= 20; i++ {
		ev, err := bus2.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	res := <-out
	require.Nil(t, res.Error, "the read ended with an error %+v; reason %s, stderr: %s", res.Error, res.Reason, stderr)
	require.Equal(t, "total", res.Reason, "stderr: %s", stderr)
	assert.Equal(t, ids, res.IDs, "the events of both nodes, once each, in order")
}
