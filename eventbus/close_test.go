package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// CloseSession while a goroutine publishes and ten subscribers read: no
// panic; each subscriber's last frame is session_closed (a real event) and
// it then ends with ErrSessionClosed; later publishes fail.
func TestCloseSessionWhilePublishing(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000, MaxQueueSize: 100_000})
	require.NoError(t, b.CreateSession("P", ""))
	require.NoError(t, b.CreateSession("s", "P"))
	opts := []eventbus.SubscribeOptions{{}, {NoReplay: true}, {Cursor: eventbus.At(0)}, {Scope: scope.Descendants},
		{Scope: scope.Subtree}, {Scope: scope.All}, {}, {}, {MaxQueued: 5, Policy: eventbus.DropNewest}, {}}
	type result struct {
		evs []eventbus.Event
		err error
	}
	results := make([]result, len(opts))
	var readers sync.WaitGroup
	for i, o := range opts {
		s := subscribe(t, b, "s", o)
		readers.Add(1)
		go func() {
			defer readers.Done()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			for {
				ev, err := s.Next(ctx)
				if err != nil {
					results[i].err = err
					return
				}
				results[i].evs = append(results[i].evs, ev)
			}
		}()
	}
	// Subscribers elsewhere that hear the close and go on.
	parent := subscribe(t, b, "P", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	all := subscribe(t, b, "other", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})

	base := b.LastEventID()
	published := make(chan uint64, 1)
	go func() {
		n := uint64(0)
		for {
			if _, err := b.Publish("s", "msg", nil); err != nil {
				if !errors.Is(err, eventbus.ErrSessionClosed) {
					t.Error(err)
				}
				published <- n
				return
			}
			n++
		}
	}()
	// Close while the publisher is running: once it has published some
	// events (a fixed sleep let a descheduled publisher publish none, and
	// the test then checked a close with nothing in flight).
	require.Eventually(t, func() bool { return b.LastEventID() >= base+100 }, waitFor, 100*time.Microsecond)
	require.NoError(t, b.CloseSession("s"))
	require.NoError(t, b.CloseSession("s"), "idempotent")
	n := <-published
	readers.Wait()

	for i, r := range results {
		require.ErrorIs(t, r.err, eventbus.ErrSessionClosed, "subscriber %d", i)
		require.NotEmpty(t, r.evs)
		last := r.evs[len(r.evs)-1]
		assert.Equal(t, frame.TypeSessionClosed, last.Type, "subscriber %d ends with session_closed", i)
		assert.NotZero(t, last.ID)
		assert.Equal(t, frame.SessionClosedData{Session: "s", Reason: "closed"}, decode[frame.SessionClosedData](t, last))
		got := ids(r.evs)
		for j := 1; j < len(got); j++ {
			require.Greater(t, got[j], got[j-1], "subscriber %d", i)
		}
		if opts[i].MaxQueued == 0 {
			assert.Equal(t, seq(got[0], got[len(got)-1]), got, "subscriber %d has no gap", i)
		}
	}
	assert.GreaterOrEqual(t, n, uint64(100), "the close came while publishing went on")
	t.Logf("%d events published before the close", n)

	_, err := b.Publish("s", "msg", nil)
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	_, err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	require.NoError(t, b.CloseSession("never"), "a no-op on an unknown id, as AgentPool's close_session")
	assert.False(t, b.SessionExists("never"), "and it creates nothing")
	assert.False(t, b.SessionExists("s"))

	// The others heard session_closed and go on.
	for _, s := range []*eventbus.Subscription{parent, all} {
		evs := drain(s)
		require.NotEmpty(t, evs)
		assert.Equal(t, frame.TypeSessionClosed, evs[len(evs)-1].Type)
		assert.Equal(t, int(n)+1, len(ids(evs)))
	}
	ev, err := b.Publish("P", "msg", nil)
	require.NoError(t, err)
	for _, s := range []*eventbus.Subscription{parent, all} {
		assert.Equal(t, []uint64{ev.ID}, ids(drain(s)))
		assert.NoError(t, s.Err())
	}
}

func TestCloseSessionTree(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("R", ""))
	require.NoError(t, b.CreateSession("A", "R"))
	require.NoError(t, b.CreateSession("B", "A"))
	all := subscribe(t, b, "U", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
	own := subscribe(t, b, "B", eventbus.SubscribeOptions{})
	require.NoError(t, b.CloseSessionTree("R"))
	evs := drain(all)
	var order []string
	for _, e := range evs {
		order = append(order, e.Session)
		assert.Equal(t, frame.TypeSessionClosed, e.Type)
	}
	assert.Equal(t, []string{"B", "A", "R"}, order, "children first")
	got, err := readToEnd(t, own)
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.Equal(t, []string{"1:session_closed"}, describe(got))
	assert.Empty(t, b.Sessions()[0].Parent)
	assert.Len(t, b.Sessions(), 1) // U
}

// 1000 sessions opened, subscribed, published to and closed leave nothing:
// no session, no subscriber, no goroutine.
func TestClosedSessionsLeaveNothing(t *testing.T) {
	before := goleak.IgnoreCurrent()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	kinds := []scope.Kind{scope.Session, scope.Descendants, scope.Subtree, scope.All}
	var subs []*eventbus.Subscription
	var pumps sync.WaitGroup
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("s%d", i)
		parent := ""
		if i%3 != 0 {
			parent = fmt.Sprintf("s%d", i-1)
		}
		require.NoError(t, b.CreateSession(id, parent))
		s, err := b.Subscribe(context.Background(), id, eventbus.SubscribeOptions{Scope: kinds[i%4]})
		require.NoError(t, err)
		if i%10 == 0 {
			pumps.Add(1)
			go func() {
				defer pumps.Done()
				for range s.Events() {
				}
			}()
		}
		subs = append(subs, s)
		_, err = b.Publish(id, "msg", i)
		require.NoError(t, err)
		if i%3 == 2 {
			for j := i; j > i-3; j-- {
				require.NoError(t, b.CloseSession(fmt.Sprintf("s%d", j)))
			}
		}
	}
	require.NoError(t, b.CloseSession("s999"))
	pumps.Wait()
	for i, s := range subs {
		require.True(t, ended(s), "subscriber %d", i)
		require.ErrorIs(t, s.Err(), eventbus.ErrSessionClosed)
	}
	st := b.Stats()
	assert.Zero(t, st.Sessions)
	assert.Zero(t, st.Subscribers)
	assert.Empty(t, testkit.SubscriberCounts(b))
	assert.Empty(t, b.Sessions())
	assert.Zero(t, st.Guarded)
	require.NoError(t, b.Close())
	goleak.VerifyNone(t, before)
}

func TestCancelEndsSubscription(t *testing.T) {
	t.Parallel()
	cause := errors.New("client went away")
	tests := []struct {
		name   string
		cancel func(s *eventbus.Subscription, cancel context.CancelCauseFunc)
		want   error
	}{
		{"context", func(_ *eventbus.Subscription, c context.CancelCauseFunc) { c(nil) }, context.Canceled},
		{"context cause", func(_ *eventbus.Subscription, c context.CancelCauseFunc) { c(cause) }, cause},
		{"Close", func(s *eventbus.Subscription, _ context.CancelCauseFunc) { s.Close(); s.Close() }, eventbus.ErrUnsubscribed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{MaxSubscribers: 1})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			s, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{})
			require.NoError(t, err)
			publish(t, b, "s", 3)
			assert.Equal(t, map[string]int{"s": 1}, testkit.SubscriberCounts(b))
			_, err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
			require.ErrorIs(t, err, eventbus.ErrSubscriberLimit)

			tt.cancel(s, cancel)
			waitEnded(t, s)
			ev, err := s.Next(context.Background())
			require.ErrorIs(t, err, tt.want, "queued frames are discarded: got %v", describe([]eventbus.Event{ev}))
			require.ErrorIs(t, s.Err(), tt.want)
			assert.Empty(t, testkit.SubscriberCounts(b))
			assert.Zero(t, b.Stats().Subscribers)
			// Its slot is free.
			s2 := subscribe(t, b, "s", eventbus.SubscribeOptions{})
			assert.Len(t, drain(s2), 3)
			// Events on an ended subscription closes at once.
			_, open := <-s.Events()
			assert.False(t, open)
		})
	}
}

// Next gives up when its own ctx is done; the subscription stays usable.
func TestNextContext(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := s.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, s.Err())
	_, ok := s.TryNext()
	assert.False(t, ok)
	publish(t, b, "s", 1)
	assert.Equal(t, []string{"1"}, describe(readN(t, s, 1)))
}

func TestBusClose(t *testing.T) {
	t.Parallel()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	require.NoError(t, b.CreateSession("c", ""))
	s1 := subscribe(t, b, "a", eventbus.SubscribeOptions{})
	s2 := subscribe(t, b, "b", eventbus.SubscribeOptions{Scope: scope.All})
	s3 := subscribe(t, b, "c", eventbus.SubscribeOptions{Scope: scope.Descendants})
	publish(t, b, "a", 2)
	evs := s2.Events()
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "idempotent")

	got, err := readToEnd(t, s1)
	require.ErrorIs(t, err, eventbus.ErrClosed)
	assert.Equal(t, []string{"1", "2"}, describe(got), "what was queued is still delivered")
	var fromChan []eventbus.Event
	for ev := range evs {
		fromChan = append(fromChan, ev)
	}
	assert.Equal(t, []string{"1", "2"}, describe(fromChan))
	require.ErrorIs(t, s2.Err(), eventbus.ErrClosed)
	_, err = readToEnd(t, s3)
	require.ErrorIs(t, err, eventbus.ErrClosed)

	_, err = b.Publish("a", "msg", nil)
	require.ErrorIs(t, err, eventbus.ErrClosed)
	_, err = b.Subscribe(context.Background(), "a", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrClosed)
	require.ErrorIs(t, b.CloseSession("a"), eventbus.ErrClosed)
	require.ErrorIs(t, b.ClearReplayBuffer("a"), eventbus.ErrClosed)
	assert.Zero(t, b.ExpireIdle())
	assert.Zero(t, b.Stats().Subscribers)
}

// The Events pump exits in every way a subscription can end, whether or
// not anyone still reads the channel. Not parallel: it counts goroutines.
func TestEventsPumpExits(t *testing.T) {
	tests := []struct {
		name string
		// end ends the subscription; the channel is not read afterwards
		// unless read is set.
		end  func(b *eventbus.Bus, s *eventbus.Subscription, cancel context.CancelFunc)
		read bool
	}{
		{"Close, unread", func(_ *eventbus.Bus, s *eventbus.Subscription, _ context.CancelFunc) { s.Close() }, false},
		{"cancel, unread", func(_ *eventbus.Bus, _ *eventbus.Subscription, c context.CancelFunc) { c() }, false},
		{"Bus.Close, read", func(b *eventbus.Bus, _ *eventbus.Subscription, _ context.CancelFunc) { _ = b.Close() }, true},
		{"Bus.Close, then Close", func(b *eventbus.Bus, s *eventbus.Subscription, _ context.CancelFunc) { _ = b.Close(); s.Close() }, false},
		{"Bus.Close, then cancel", func(b *eventbus.Bus, _ *eventbus.Subscription, c context.CancelFunc) { _ = b.Close(); c() }, false},
		{"CloseSession, read", func(b *eventbus.Bus, _ *eventbus.Subscription, _ context.CancelFunc) { must(b.CloseSession("s")) }, true},
		{"CloseSession, then cancel", func(b *eventbus.Bus, _ *eventbus.Subscription, c context.CancelFunc) {
			must(b.CloseSession("s"))
			c()
		}, false},
		{"evicted, read", func(b *eventbus.Bus, _ *eventbus.Subscription, _ context.CancelFunc) {
			for i := 0; i < 10; i++ {
				_, _ = b.Publish("s", "msg", i)
			}
		}, true},
		{"evicted, then cancel", func(b *eventbus.Bus, _ *eventbus.Subscription, c context.CancelFunc) {
			for i := 0; i < 10; i++ {
				_, _ = b.Publish("s", "msg", i)
			}
			c()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			b, err := eventbus.New(eventbus.Options{})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{MaxQueued: 2, Policy: eventbus.DropSubscriber})
			require.NoError(t, err)
			publish(t, b, "s", 1)
			ch := s.Events()
			first := <-ch
			assert.Equal(t, uint64(1), first.ID)
			publish(t, b, "s", 2) // the pump blocks sending the first of them
			tt.end(b, s, cancel)
			if tt.read {
				n := 0
				for range ch {
					n++
				}
				assert.NotZero(t, n)
				assert.Error(t, s.Err())
			}
			require.NoError(t, b.Close())
			goleak.VerifyNone(t, before)
		})
	}
}

// The Events channel closes only after Err can say why, also when the
// context is cancelled while the pump is handing over a frame.
func TestEventsErrSetWhenChannelCloses(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{NoReplay: true})
		require.NoError(t, err)
		ch := s.Events()
		_, err = b.Publish("s", "msg", nil)
		require.NoError(t, err)
		cancel()
		for range ch {
		}
		require.ErrorIs(t, s.Err(), context.Canceled)
	}
}

// TestDoneAndEventsRaceTheEnd: Done and Events are made on demand;
// asked for at the same moment as the subscription ends — by Close, by its
// context, by CloseSession or by eviction — Done must still be closed, the
// Events channel must still close after yielding what was queued (nothing
// after an end that discards), and no pump goroutine may be left (goleak in
// TestMain). Every one of the 4 × 200 rounds checks it; no timing decides.
func TestDoneAndEventsRaceTheEnd(t *testing.T) {
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

// 10,000 subscriptions whose Events channel is opened and never read keep
// no goroutine after Bus.Close.
func TestEventsPumpsEndWithBusClose(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 subscriptions")
	}
	before := goleak.IgnoreCurrent()
	const n = 10_000
	b, err := eventbus.New(eventbus.Options{MaxSubscribers: n})
	require.NoError(t, err)
	base := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		_ = s.Events() // opened, never read
	}
	publish(t, b, "s", 2) // every pump now blocks handing over a frame
	require.Eventually(t, func() bool { return runtime.NumGoroutine() >= base+n }, waitFor, time.Millisecond)
	running := runtime.NumGoroutine()
	start := time.Now()
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= base }, waitFor, 10*time.Millisecond,
		"pumps still running after Close: %d goroutines, %d before", runtime.NumGoroutine(), base)
	t.Logf("%d goroutines with %d unread Events channels; back to %d within %v of Bus.Close",
		running, n, runtime.NumGoroutine(), time.Since(start).Round(10*time.Millisecond))
	goleak.VerifyNone(t, before)
}

// A reader that keeps reading after Bus.Close still gets everything queued.
// Runs on synctest's clock: the reader takes 1 ms per event, 50 ms in all,
// well inside the second a pump waits for a reader after Bus.Close.
func TestEventsDrainAfterBusClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, err := eventbus.New(eventbus.Options{})
		require.NoError(t, err)
		s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		want := publish(t, b, "s", 50)
		require.NoError(t, b.Close())
		var got []uint64
		for ev := range s.Events() {
			got = append(got, ev.ID)
			time.Sleep(time.Millisecond) // a slow but live reader
		}
		assert.Equal(t, want, got)
		assert.True(t, errors.Is(s.Err(), eventbus.ErrClosed))
	})
}
