package eventbus_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// TestReviewDoneAndEventsRaceTheEnd: Done and Events are made on demand;
// asked for at the same moment as the subscription ends — by Close, by its
// context, by CloseSession or by eviction — Done must still be closed, the
// Events channel must still close after yielding what was queued (nothing
// after an end that discards), and no pump goroutine may be left (goleak in
// TestMain). Every one of the 4 × 200 rounds checks it; no timing decides.
func TestReviewDoneAndEventsRaceTheEnd(t *testing.T) {
	bus := newBus(t, eventbus.Options{})
	for round := range 800 {
		how := round % 4
		ctx, cancel := context.WithCancel(context.Background())
		o := eventbus.SubscribeOptions{NoReplay: true}
		if how == 3 {
			o.MaxQueued, o.Policy = 1, eventbus.DropSubscriber
		}
		sess := "s"
		if how == 2 {
			sess = "closing"
		}
		sub, err := bus.Subscribe(ctx, sess, o)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var done <-chan struct{}
		var events <-chan eventbus.Event
		wg.Add(2)
		go func() { defer wg.Done(); done = sub.Done() }()
		go func() { defer wg.Done(); events = sub.Events() }()
		switch how {
		case 0:
			sub.Close()
		case 1:
			cancel()
		case 2:
			require.NoError(t, bus.CloseSession("closing"))
		case 3:
			for range 3 { // the second one overflows: client_evicted
				_, err := bus.Publish(sess, "t", nil)
				require.NoError(t, err)
			}
		}
		wg.Wait()
		n := 0
		for range events {
			n++
		}
		<-done // must be closed: the subscription has ended
		err = sub.Err()
		switch how {
		case 0:
			assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)
		case 1:
			assert.ErrorIs(t, err, context.Canceled)
		case 2:
			assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
			assert.LessOrEqual(t, n, 1, "at most session_closed")
		case 3:
			assert.True(t, errors.Is(err, eventbus.ErrEvicted), "round %d: %v", round, err)
		}
		cancel()
		if how == 2 {
			require.NoError(t, bus.CreateSession("closing", ""))
		}
	}
}
