package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
)

// A node whose NATS server has gone does not wait one publish timeout per
// turn it runs when it closes: its goodbye turn_ends are tried side by side
// (each may still be stored if the connection comes back in time), and the
// lease keys are not purged over a connection that is down (they expire
// with their lease; other nodes write producer_lost). It used to take one
// publish timeout per turn plus one for the leases (20 s here); now one
// for the goodbyes and, at most, the bounded release of the turns' keys.
func TestCloseWithServerGoneDoesNotWaitPerTurn(t *testing.T) {
	t.Parallel()
	srv, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer srv.Shutdown()
	const timeout = 3 * time.Second
	n := newNode(t, srv.ClientURL(), eventbus.Options{TurnLease: 30 * time.Second},
		uniqueStream(rbnats.WithPublishTimeout(timeout))...)
	const turns = 4
	for i := range turns {
		s := fmt.Sprintf("s%d", i)
		require.NoError(t, n.bus.CreateSession(s, ""))
		_, err := n.bus.StartTurn(context.Background(), s, eventbus.TurnOptions{ID: "t"})
		require.NoError(t, err)
	}
	srv.Shutdown()
	require.Eventually(t, func() bool { return n.be.Ready() != nil }, 5*time.Second, 10*time.Millisecond)

	start := time.Now()
	require.NoError(t, n.bus.Close())
	took := time.Since(start)
	// Before: 20 s (a timeout per turn and more). After: 3–8 s.
	assert.Less(t, took, turns*timeout, "Close of a node cut off from NATS waited %v", took)
}
