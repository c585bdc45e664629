package eventbus

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An ended subscription leaves the deadline queue at once (it is not kept
// alive until its deadline), and the queue's timer stops with the bus.
func TestDeadlineQueueDropsEndedSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(Options{})
		require.NoError(t, err)
		var subs []*Subscription
		for range 3 {
			s, err := b.Subscribe(context.Background(), "s1", SubscribeOptions{NoReplay: true})
			require.NoError(t, err)
			subs = append(subs, s)
			go func() { _, _ = s.NextBefore(time.Now().Add(time.Hour)) }()
		}
		synctest.Wait()
		assert.Equal(t, 3, b.waits.Len())
		subs[1].Close()
		synctest.Wait()
		assert.Equal(t, 2, b.waits.Len())
		assert.False(t, subs[1].dl.Queued(), "the ended subscription has no entry")
		assert.True(t, subs[0].dl.Queued())
		assert.True(t, subs[2].dl.Queued())
		require.NoError(t, b.Close())
		synctest.Wait()
		assert.Zero(t, b.waits.Len())
		assert.True(t, b.waits.Closed())
	})
}
