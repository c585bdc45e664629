package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// TestBytePayloadTwoNodes: byte payloads published on one node reach a
// live subscriber on the other, and the replay of both nodes, as the same
// bytes with the same media type; a JSON event beside them stays JSON.
func TestBytePayloadTwoNodes(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	syncNode(t, b.bus)
	live := testkit.Subscribe(t, b.bus, "s", eventbus.SubscribeOptions{NoReplay: true})
	n := len(testkit.BytePayloads) + 1
	ids := testkit.PublishBytePayloads(t, a.bus, "s")
	reader := func(s *eventbus.Subscription) func() (eventbus.Event, error) {
		return func() (eventbus.Event, error) { return next(t, s), nil }
	}
	testkit.CheckBytePayloads(t, testkit.ReadEvents(t, reader(live), n), ids, false)
	for _, nd := range []*node{a, b} {
		syncNode(t, nd.bus)
		replay, err := nd.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		testkit.CheckBytePayloads(t, testkit.ReadEvents(t, reader(replay), n), ids, true)
		replay.Close()
	}
}
