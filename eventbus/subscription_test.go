package eventbus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// All is the range-over-func form of Next: `async for event in queue`.
func TestSubscriptionAll(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	want := publish(t, b, "s", 3)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	var got []uint64
	for ev, err := range s.All(context.Background()) {
		require.NoError(t, err)
		got = append(got, ev.ID)
		if len(got) == 2 {
			break
		}
	}
	assert.Equal(t, want[:2], got, "break leaves the subscription open")
	assert.NoError(t, s.Err())

	more := publish(t, b, "s", 1)
	go func() { _ = b.CloseSession("s") }()
	var end error
	for ev, err := range s.All(context.Background()) {
		if err != nil {
			end = err
			break
		}
		got = append(got, ev.ID)
	}
	assert.ErrorIs(t, end, eventbus.ErrSessionClosed, "the last step yields why it ended")
	assert.Equal(t, append(append(want[:2:2], want[2]), more[0], b.LastEventID()), got)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	s3 := subscribe(t, b, "other", eventbus.SubscribeOptions{})
	for _, err := range s3.All(ctx) {
		assert.ErrorIs(t, err, context.DeadlineExceeded, "ctx done: its error, and the subscription stays usable")
	}
	assert.NoError(t, s3.Err())
}
