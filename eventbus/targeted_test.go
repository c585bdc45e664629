package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// TestSendToOrderAndIDs: a targeted frame arrives without id, after the
// replay and replay_complete, in order with the live events around it, and
// the next published event gets the id it would have got without it.
func TestSendToOrderAndIDs(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s", 2) // 1, 2
	sub := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(1)})
	require.NoError(t, b.SendTo("hello", map[string]string{"to": "you"}, sub))
	ev, err := b.Publish("s", "msg", 1)
	require.NoError(t, err)
	assert.EqualValues(t, 3, ev.ID, "a targeted frame consumes no id")
	require.NoError(t, b.SendTo("bye", nil, sub))

	got := drain(sub)
	var shape []string
	for _, e := range got {
		shape = append(shape, e.Type+":"+strconv.FormatUint(e.ID, 10))
	}
	assert.Equal(t, []string{"msg:2", "replay_complete:0", "hello:0", "msg:3", "bye:0"}, shape)
	assert.JSONEq(t, `{"to":"you"}`, string(got[2].Data))
	assert.Equal(t, "s", got[2].Session)
	assert.False(t, got[2].Replay)
	assert.EqualValues(t, 3, b.LastEventID())
}

// TestSendToNeverReplayed: a resume, a fresh subscriber and a scope-all
// subscriber replay only published events; the targeted frame reached only
// its subscription.
func TestSendToNeverReplayed(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	a := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	other := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	all := subscribe(t, b, "s", eventbus.SubscribeOptions{Scope: scope.All})
	publish(t, b, "s", 1)
	require.NoError(t, b.SendTo("prompt", "only a", a))
	publish(t, b, "s", 1)

	types := func(evs []eventbus.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	assert.Equal(t, []string{"msg", "prompt", "msg"}, types(drain(a)))
	assert.Equal(t, []string{"msg", "msg"}, types(drain(other)), "isolated per subscription")
	assert.Equal(t, []string{"msg", "msg"}, types(drain(all)))

	fresh := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	assert.Equal(t, []string{"msg", "msg"}, types(drain(fresh)), "never in a replay")
	resumed := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
	assert.Equal(t, []string{"msg", "msg", "replay_complete"}, types(drain(resumed)))
}

// TestSendToQueueLimits: a targeted frame counts against the live limits;
// when the queue is full it is refused with ErrQueueFull and the subscriber
// is not touched; drop_oldest never drops it.
func TestSendToQueueLimits(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 3, Policy: eventbus.DropSubscriber})
	for i := range 3 {
		require.NoError(t, b.SendTo("t", i, sub))
	}
	err := b.SendTo("t", 3, sub)
	require.ErrorIs(t, err, eventbus.ErrQueueFull)
	assert.Contains(t, err.Error(), fmt.Sprintf("subscriber %d (session %q)", sub.ID(), "s"), "the error names the subscription")
	assert.NoError(t, sub.Err(), "a refused targeted frame does not evict")
	// Published events see the full queue: the policy evicts.
	publish(t, b, "s", 1)
	assert.ErrorIs(t, sub.Err(), eventbus.ErrEvicted)
	got := drain(sub)
	require.Len(t, got, 4)
	assert.Equal(t, frame.TypeClientEvicted, got[3].Type)

	// drop_oldest drops the published events, never the targeted frames.
	keep := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 3, Policy: eventbus.DropOldest})
	publish(t, b, "s", 1)
	require.NoError(t, b.SendTo("t", "x", keep))
	require.NoError(t, b.SendTo("t", "y", keep))
	publish(t, b, "s", 2)
	var shape []string
	for _, e := range drain(keep) {
		shape = append(shape, e.Type)
	}
	assert.Equal(t, []string{"state_resync_required", "t", "t", "state_resync_required", "msg"}, shape)
	// Reading frees the room again.
	assert.NoError(t, b.SendTo("t", "z", keep))
}

// TestSendToErrors: bad input names the value; ended subscriptions are
// reported with their reason; after Close, ErrClosed.
func TestSendToErrors(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	assert.ErrorIs(t, b.SendTo("", nil, sub), eventbus.ErrInvalid)
	err := b.SendTo(frame.TypeClientEvicted, nil, sub)
	assert.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.ErrorContains(t, err, "client_evicted")
	err = b.SendTo("stream_start", nil, sub)
	assert.ErrorIs(t, err, eventbus.ErrInvalid, "a targeted frame cannot pass for the handlers' stream_start")
	assert.ErrorContains(t, err, "stream_start")
	assert.ErrorIs(t, b.SendTo("t", make(chan int), sub), eventbus.ErrInvalid)
	assert.NoError(t, b.SendTo("t", nil), "no subscription: nothing to do")
	assert.NoError(t, b.SendTo("t", nil, nil))

	other := newBus(t, eventbus.Options{})
	foreign := subscribe(t, other, "s", eventbus.SubscribeOptions{})
	assert.ErrorIs(t, b.SendTo("t", nil, foreign), eventbus.ErrInvalid)

	sub.Close()
	assert.ErrorIs(t, b.SendTo("t", nil, sub), eventbus.ErrUnsubscribed)
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.SendTo("t", nil, foreign), eventbus.ErrClosed)
}

// TestSendToRaceClose sends targeted frames from several goroutines while
// publishes run and the subscriptions are closed, evicted and their session
// closed: under -race nothing races, nothing panics, no id is consumed and
// every subscriber sees strictly increasing ids.
func TestSendToRaceClose(t *testing.T) {
	// drop_subscriber: a reader that falls behind is evicted and so ends;
	// under drop_oldest it could miss every id above 200 (announced) and
	// wait for more forever.
	b := newBus(t, eventbus.Options{OverflowPolicy: eventbus.DropSubscriber})
	const n = 8
	subs := make([]*eventbus.Subscription, n)
	for i := range subs {
		var err error
		subs[i], err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{MaxQueued: 64})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var published sync.Map
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 300 {
			if ev, err := b.Publish("s", "msg", i); err == nil {
				published.Store(ev.ID, true)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 300 {
			err := b.SendTo("t", i, subs...)
			if err != nil {
				assert.True(t, errors.Is(err, eventbus.ErrQueueFull) || errors.Is(err, eventbus.ErrUnsubscribed) ||
					errors.Is(err, eventbus.ErrEvicted) || errors.Is(err, eventbus.ErrSessionClosed), "%v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i, s := range subs {
			if i%2 == 0 {
				s.Close()
			}
		}
	}()
	for i := 1; i < n; i += 2 {
		wg.Add(1)
		go func(s *eventbus.Subscription) {
			defer wg.Done()
			var last uint64
			for {
				ev, err := s.Next(context.Background())
				if err != nil {
					return
				}
				if ev.ID != 0 {
					assert.Greater(t, ev.ID, last)
					last = ev.ID
				}
				if last > 200 {
					s.Close()
				}
			}
		}(subs[i])
	}
	wg.Wait()
	last := b.LastEventID()
	count := 0
	published.Range(func(any, any) bool { count++; return true })
	assert.EqualValues(t, count, last, "every id went to a publish")
	require.NoError(t, b.CloseSession("s"))
	assert.Zero(t, b.Stats().Guarded)
}
