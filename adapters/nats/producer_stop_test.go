package nats_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// A stamped publish whose server stops while it waits for the batch's ack
// (the batch sent, the server shut down before answering) fails with
// ErrNoAck, which says the event may or may not be stored, within the
// publish timeout: no hang. Every stamped publish and producer check after
// it fails too, naming what failed, and the node closes without a leak
// (TestMain's goleak). The batch is held in a paused proxy until the
// server is gone, so no half-staged batch outlives the server.
func TestProducerPublishFailsWhenServerStops(t *testing.T) {
	srv, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer srv.Shutdown()
	px := newProxy(t, srv.ClientURL()[len("nats://"):])
	n := newNode(t, px.URL(), eventbus.Options{}, uniqueStream(rbnats.WithPublishTimeout(time.Second))...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	p := producer.Stamp{ID: "w", Epoch: 1}
	_, err = stamped(n.bus, "s", p, `0`)
	require.NoError(t, err)

	px.Pause()
	out := n.nc.Stats().OutMsgs
	p.Seq = 1
	done := make(chan error, 1)
	go func() { _, err := stamped(n.bus, "s", p, `1`); done <- err }()
	require.Eventually(t, func() bool { return n.nc.Stats().OutMsgs >= out+2 }, 10*time.Second, time.Millisecond,
		"the batch's two messages sent")
	srv.Shutdown()
	px.Resume()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a stamped publish hung after its server stopped")
	}
	require.ErrorIs(t, err, rbnats.ErrNoAck)
	assert.ErrorContains(t, err, "may or may not be stored")

	// Later publishes and checks fail as well, each with an error.
	for _, st := range []producer.Stamp{p, {ID: "other", Epoch: 1}} {
		_, err = stamped(n.bus, "s", st, `2`)
		require.Error(t, err, "%+v", st)
		assert.False(t, errors.Is(err, producer.ErrDuplicate), "%v", err)
		assert.ErrorContains(t, err, "nats")
	}
	err = n.bus.CheckProducer("s", p)
	require.Error(t, err)
	assert.ErrorContains(t, err, "producer record")
	require.NoError(t, n.bus.Close())
}
