package eventbus

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/config"
)

// TestReviewDeadlineQueueNoEntryAfterEnd: a subscription that ends while
// its reader is parking in NextBefore (between marking itself parked and
// entering the deadline queue) must not be left in the queue: the end
// removes the entry, and an entry added after the end would keep the
// ended subscription (and its bus) referenced until its deadline — an hour
// here. Checked once every reader has returned, so no timing decides it.
func TestReviewDeadlineQueueNoEntryAfterEnd(t *testing.T) {
	b, err := New(config.Config{})
	require.NoError(t, err)
	defer b.Close()
	queued := func() int {
		b.waits.mu.Lock()
		defer b.waits.mu.Unlock()
		return len(b.waits.h)
	}
	far := time.Now().Add(time.Hour)
	for i := range 3000 {
		s, err := b.Subscribe(context.Background(), "s", SubscribeOptions{NoReplay: true})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.NextBefore(far)
			require.ErrorIs(t, err, ErrUnsubscribed)
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				runtime.Gosched()
			}
			s.Close()
		}()
		wg.Wait()
		require.Zero(t, queued(), "round %d: an ended subscription is still in the deadline queue", i)
	}
}
