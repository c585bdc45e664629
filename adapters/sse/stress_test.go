package sse_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// 50 clients connect, read and cancel at random while 10,000 events are
// published: nothing panics, every stream sees strictly increasing ids
// across its reconnects, and afterwards the handler has no stream, the bus
// no subscriber, and the goroutine count is back to where it started.
func TestStressClientsCancelDuringPublishes(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Retry: time.Millisecond})
	srv := serve(t, h, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &sse.Client{HTTPClient: &http.Client{Transport: tr}, Retry: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	baseline := goleak.IgnoreCurrent()

	const clients, events = 50, 10_000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var streams, frames int
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			url := srv.URL + "/session/s1/events"
			if i%2 == 1 {
				url += "?replay=0&maxQueued=64"
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(100_000))*time.Microsecond)
				s := client.Subscribe(ctx, url, sse.StreamOptions{})
				var last uint64
				n := 0
				for {
					ev, err := s.Next()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, eventbus.ErrSubscriberLimit) &&
							!errors.Is(err, resume.ErrStreamClosed) {
							assert.NoError(t, err)
						}
						break
					}
					n++
					if ev.ID != 0 {
						assert.Greater(t, ev.ID, last, "ids rise strictly within a stream, across reconnects")
						last = ev.ID
					}
					if rng.IntN(500) == 0 {
						_ = s.Close() // some leave by Close instead of the context
					}
				}
				cancel()
				mu.Lock()
				streams++
				frames += n
				mu.Unlock()
			}
		}()
	}
	for i := range events {
		_, err := b.Publish("s1", "tick", i)
		require.NoError(t, err)
		if i%50 == 0 {
			runtime.Gosched() // let the clients read while events are published
		}
	}
	// On a loaded machine a connect can outlast a client's deadline (up to
	// 100 ms): keep the clients reconnecting until they have read, so that
	// the check below is of the handler, not of the machine's load.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return frames > clients }, time.Minute, 10*time.Millisecond,
		"the clients did read")
	close(stop)
	wg.Wait()

	waitIdle(t, h, b)
	tr.CloseIdleConnections()
	// Every goroutine the test started is gone, within 10 s. goleak.Find
	// ignores the goroutine that calls it, Eventually's.
	var leaked error
	require.Eventually(t, func() bool { leaked = goleak.Find(baseline); return leaked == nil }, 10*time.Second, 50*time.Millisecond,
		"goroutines left: %v", &leaked)
	st := h.Stats()
	t.Logf("streams %d, frames %d, handler %+v, bus evicted %d", streams, frames, st, b.Stats().Evicted)
	assert.Greater(t, streams, clients)
	// How much each client reads depends on the machine's load; that they
	// read at all, across many reconnects, is what counts here.
	assert.Greater(t, frames, clients, "the clients did read")
	assert.Zero(t, b.Stats().Guarded)
}
