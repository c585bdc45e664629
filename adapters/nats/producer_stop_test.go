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

// A stamped publish whose server cannot answer (the connection frozen by
// the proxy, the server then shut down) fails within the publish timeout:
// with ErrNoAck, which says the event may or may not be stored, when the
// batch went out, else with the stream's error; no hang. Every stamped
// publish and producer check after it fails too, naming what failed, and
// the node closes without a leak (TestMain's goleak). The batch is held in
// a paused proxy until the server is gone, so no half-staged batch
// outlives the server.
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

	// The paused proxy holds the batch (and whatever the node sends
	// meanwhile), so no ack can come: the publish fails within the publish
	// timeout, while the server stops. Either the batch went out (ErrNoAck:
	// it may or may not be stored) or the node stopped trusting the stream
	// before sending it (a consumer heartbeat missed while paused makes it
	// confirm the stream first, a request the proxy holds too): the
	// stream's error. Never a hang, never a duplicate's acknowledgement.
	px.Pause()
	p.Seq = 1
	done := make(chan error, 1)
	go func() { _, err := stamped(n.bus, "s", p, `1`); done <- err }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a stamped publish hung while its server was unreachable")
	}
	srv.Shutdown()
	px.Resume()
	require.Error(t, err)
	assert.False(t, errors.Is(err, producer.ErrDuplicate), "%v", err)
	if errors.Is(err, rbnats.ErrNoAck) {
		assert.ErrorContains(t, err, "may or may not be stored")
	} else {
		assert.ErrorContains(t, err, "nats: stream")
	}

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
