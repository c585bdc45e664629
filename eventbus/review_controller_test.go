package eventbus_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// TestReviewPanickingSessionControllerDoesNotWedgeTheBus: the session
// controller runs with the structure lock held exclusively. A controller
// that panics used to take that lock with it — Publish panicked and every
// later call of the bus (and Close) waited forever. Now the call that
// created the session returns an ErrInvalid error naming the panic, nothing
// is created for it, and the bus goes on.
func TestReviewPanickingSessionControllerDoesNotWedgeTheBus(t *testing.T) {
	bus := newBus(t, eventbus.Options{SessionController: func(id string) string {
		switch id {
		case "boom":
			panic("controller bug")
		case "child":
			return "boom" // the parent's lookup panics
		}
		return ""
	}})
	for _, id := range []string{"boom", "child"} {
		var err error
		require.NotPanics(t, func() { _, err = bus.Publish(id, "t", nil) }, "publish %s", id)
		require.ErrorIs(t, err, eventbus.ErrInvalid)
		assert.Contains(t, err.Error(), "controller bug")
		assert.False(t, bus.SessionExists(id))
		require.NotPanics(t, func() {
			_, err = bus.Subscribe(context.Background(), id, eventbus.SubscribeOptions{})
		}, "subscribe %s", id)
		require.ErrorIs(t, err, eventbus.ErrInvalid)
	}
	// The bus is not wedged.
	_, err := bus.Publish("fine", "t", nil)
	require.NoError(t, err)
	require.NoError(t, bus.CreateSession("boom", "")) // CreateSession does not ask
	_, err = bus.Publish("boom", "t", nil)
	require.NoError(t, err)
}
