package eventbus

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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

// A subscription that ends while
// its reader is parking in NextBefore (between marking itself parked and
// entering the deadline queue) must not be left in the queue: the end
// removes the entry, and an entry added after the end would keep the
// ended subscription (and its bus) referenced until its deadline — an hour
// here. Checked once every reader has returned, so no timing decides it.
func TestDeadlineQueueNoEntryAfterEnd(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	defer b.Close()
	queued := b.waits.Len
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

// Readers wait with NextBefore and short
// deadlines (the queue's timer fires all the time) while publishers run,
// some subscriptions are closed or their contexts cancelled, and finally
// the bus closes. Every reader must see strictly increasing ids, return
// only frames, ErrTimeout or the reason of the end, and end; afterwards
// the deadline queue is empty and stopped.
func TestNextBeforeStress(t *testing.T) {
	b, err := New(Options{MaxQueueSize: 100_000})
	require.NoError(t, err)
	const readers = 24
	var wg sync.WaitGroup
	errc := make(chan error, readers)
	subs := make([]*Subscription, readers)
	cancels := make([]context.CancelFunc, readers)
	for i := range readers {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		s, err := b.Subscribe(ctx, "s", SubscribeOptions{NoReplay: true})
		require.NoError(t, err)
		subs[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for j := 0; ; j++ {
				ev, err := s.NextBefore(time.Now().Add(time.Duration(j%5) * 50 * time.Microsecond))
				switch {
				case err == nil:
					if ev.ID != 0 && ev.ID <= last {
						errc <- fmt.Errorf("reader %d: id %d after %d", i, ev.ID, last)
						return
					}
					last = max(last, ev.ID)
				case errors.Is(err, ErrTimeout):
				case errors.Is(err, ErrClosed), errors.Is(err, ErrUnsubscribed), errors.Is(err, context.Canceled):
					return
				default:
					errc <- fmt.Errorf("reader %d: %w", i, err)
					return
				}
			}
		}()
	}
	var pw sync.WaitGroup
	for range 2 {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for range 3000 {
				if _, err := b.Publish("s", "t", nil); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for i := 0; i < readers/2; i++ {
		if i%2 == 0 {
			subs[i].Close()
		} else {
			cancels[i]()
		}
		runtime.Gosched()
	}
	pw.Wait()
	require.NoError(t, b.Close())
	wg.Wait()
	for _, c := range cancels {
		c()
	}
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	assert.Zero(t, b.waits.Len(), "the deadline queue holds ended subscriptions")
	assert.True(t, b.waits.Closed())
}

// A publish wakes a consumer only when it has parked: events queued for a
// subscriber nobody is reading, or one still taking its batch, cost no
// goroutine hand-off; a parked reader gets exactly one wake-up for the
// publish that finds it parked, and one for the end of its subscription.
func TestWakeOnlyAParkedConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wakes atomic.Int64
		testHookWake = func() { wakes.Add(1) }
		defer func() { testHookWake = nil }()
		b, err := New(Options{})
		require.NoError(t, err)
		s, err := b.Subscribe(context.Background(), "s", SubscribeOptions{NoReplay: true})
		require.NoError(t, err)
		for range 10 {
			_, err := b.PublishJSON("s", "t", []byte(`{}`))
			require.NoError(t, err)
		}
		assert.Zero(t, wakes.Load(), "nobody is parked: no wake-up")

		got := make(chan uint64, 20)
		done := make(chan error, 1)
		go func() {
			for {
				ev, err := s.Next(context.Background())
				if err != nil {
					done <- err
					return
				}
				got <- ev.ID
			}
		}()
		synctest.Wait() // the reader took the ten and parked
		require.Len(t, got, 10)
		assert.Zero(t, wakes.Load(), "the reader found its events queued: no wake-up")

		ev, err := b.PublishJSON("s", "t", []byte(`{}`))
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, int64(1), wakes.Load(), "one publish, one parked reader: one wake-up")
		require.Len(t, got, 11)

		s.Close()
		synctest.Wait()
		assert.ErrorIs(t, <-done, ErrUnsubscribed)
		assert.Equal(t, int64(2), wakes.Load(), "the end wakes the parked reader once")
		for range 10 {
			<-got
		}
		assert.Equal(t, ev.ID, <-got)
		require.NoError(t, b.Close())
		synctest.Wait()
	})
}

// A lock-free delivery (the lane: no s.mu) that lands after the reader
// found nothing queued and before it set its parked mark still reaches it:
// the reader looks at the lane again once the mark is set and does not
// sleep. Without that second look the publisher finds no mark, sends no
// wake-up, and the reader sleeps until its deadline. Each row parks
// through one reader.
func TestParkSeesLaneDelivery(t *testing.T) {
	const parkDeadline = 6 * time.Second
	for _, tc := range []struct {
		name string
		read func(s *Subscription) (Event, error)
	}{
		{"NextBefore", func(s *Subscription) (Event, error) { return s.NextBefore(time.Now().Add(parkDeadline)) }},
		{"NextBatch", func(s *Subscription) (Event, error) {
			buf := make([]Event, 4)
			n, err := s.NextBatch(time.Now().Add(parkDeadline), buf)
			return buf[0], errors.Join(err, map[bool]error{false: fmt.Errorf("%d frames", n)}[n == 1])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Options{})
			require.NoError(t, err)
			defer func() { require.NoError(t, b.Close()) }()
			s, err := b.Subscribe(context.Background(), "s", SubscribeOptions{NoReplay: true})
			require.NoError(t, err)
			// The first delivery makes the lane (locked); read it.
			_, err = b.PublishJSON("s", "msg", nil)
			require.NoError(t, err)
			_, ok := s.TryNext()
			require.True(t, ok)

			fired := false
			testHookPark = func() {
				if fired {
					return
				}
				fired = true
				done := make(chan error)
				go func() {
					_, err := b.PublishJSON("s", "msg", nil)
					done <- err
				}()
				assert.NoError(t, <-done)
			}
			defer func() { testHookPark = nil }()
			start := time.Now()
			ev, err := tc.read(s)
			require.NoError(t, err)
			require.Less(t, time.Since(start), parkDeadline/2, "the reader slept past the delivery until its deadline")
			assert.EqualValues(t, 2, ev.ID)
			assert.True(t, fired)
		})
	}
}
