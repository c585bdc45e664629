package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// nextBefore runs NextBefore on its own goroutine and reports what it
// returned and when (synctest time).
func nextBefore(s *eventbus.Subscription, deadline time.Time) <-chan waitResult {
	c := make(chan waitResult, 1)
	go func() {
		ev, err := s.NextBefore(deadline)
		c <- waitResult{ev, err, time.Now()}
	}()
	return c
}

type waitResult struct {
	ev  eventbus.Event
	err error
	at  time.Time
}

func TestNextBeforeTimesOutAtTheDeadlineNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		s := subscribe(t, b, "s1", eventbus.SubscribeOptions{})
		start := time.Now()
		c := nextBefore(s, start.Add(15*time.Second))
		time.Sleep(15*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case r := <-c:
			t.Fatalf("returned %v before the deadline", r.err)
		default:
		}
		r := <-c
		require.ErrorIs(t, r.err, eventbus.ErrTimeout)
		assert.False(t, errors.Is(r.err, context.DeadlineExceeded), "not a context error")
		assert.Equal(t, start.Add(15*time.Second), r.at)
		assert.NoError(t, s.Err(), "a timeout leaves the subscription live")

		// Usable afterwards: the next event is the first one published.
		ids := publish(t, b, "s1", 1)
		r = <-nextBefore(s, time.Now().Add(time.Second))
		require.NoError(t, r.err)
		assert.Equal(t, ids[0], r.ev.ID)
	})
}

func TestNextBeforeReturnsAReadyFramePastItsDeadline(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s1", eventbus.SubscribeOptions{})
	ids := publish(t, b, "s1", 2)
	for _, id := range ids {
		ev, err := s.NextBefore(time.Now().Add(-time.Hour))
		require.NoError(t, err)
		assert.Equal(t, id, ev.ID)
	}
	_, err := s.NextBefore(time.Now().Add(-time.Hour))
	require.ErrorIs(t, err, eventbus.ErrTimeout)
	_, ok := s.TryNext()
	assert.False(t, ok)
}

func TestNextBeforeWakesForAFrameAndTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		s, err := b.Subscribe(ctx, "s1", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		start := time.Now()

		c := nextBefore(s, start.Add(time.Hour))
		time.Sleep(time.Second)
		ids := publish(t, b, "s1", 1)
		r := <-c
		require.NoError(t, r.err)
		assert.Equal(t, ids[0], r.ev.ID)
		assert.Equal(t, start.Add(time.Second), r.at, "woken by the publish, at once")

		// The subscribe context's end wakes a parked reader at once and
		// frees the slot.
		c = nextBefore(s, start.Add(time.Hour))
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		r = <-c
		require.ErrorIs(t, r.err, context.Canceled)
		assert.Equal(t, start.Add(2*time.Second), r.at)
		assert.Zero(t, testkit.SubscriberCounts(b)["s1"])

		// Close and a zero deadline (no deadline at all).
		s2 := subscribe(t, b, "s1", eventbus.SubscribeOptions{NoReplay: true})
		c = nextBefore(s2, time.Time{})
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		select {
		case r := <-c:
			t.Fatalf("a zero deadline returned %v", r.err)
		default:
		}
		s2.Close()
		require.ErrorIs(t, (<-c).err, eventbus.ErrUnsubscribed)
	})
}

// The deadline queue keeps one entry per subscription and moves it lazily:
// a reader whose deadline moves on with every frame is neither woken early
// nor late, and one whose deadline moves earlier gets the earlier one.
func TestNextBeforeMovingDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		s := subscribe(t, b, "s1", eventbus.SubscribeOptions{})
		start := time.Now()

		// Parked until start+10s; a frame at +4s; parked again until
		// +4s+10s. The first entry fires at +10s and must not end the wait.
		c := nextBefore(s, start.Add(10*time.Second))
		time.Sleep(4 * time.Second)
		publish(t, b, "s1", 1)
		require.NoError(t, (<-c).err)
		c = nextBefore(s, start.Add(14*time.Second))
		r := <-c
		require.ErrorIs(t, r.err, eventbus.ErrTimeout)
		assert.Equal(t, start.Add(14*time.Second), r.at, "the later deadline, not the queued one")

		// An earlier deadline than the one queued: a long wait ends by a
		// frame, then a short one must time out on time.
		c = nextBefore(s, start.Add(time.Hour))
		time.Sleep(time.Second) // +15s
		publish(t, b, "s1", 1)
		require.NoError(t, (<-c).err)
		r = <-nextBefore(s, start.Add(17*time.Second))
		require.ErrorIs(t, r.err, eventbus.ErrTimeout)
		assert.Equal(t, start.Add(17*time.Second), r.at)
	})
}

// Many parked readers with deadlines in random order each time out at its
// own deadline (the heap and its one timer).
func TestNextBeforeManyDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{MaxSubscribers: 1000})
		start := time.Now()
		rng := rand.New(rand.NewPCG(1, 2))
		var wg sync.WaitGroup
		for i := range 200 {
			s := subscribe(t, b, "s1", eventbus.SubscribeOptions{})
			d := start.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
			wg.Go(func() {
				for round := range 3 {
					deadline := d.Add(time.Duration(round) * time.Duration(i+1) * time.Millisecond)
					_, err := s.NextBefore(deadline)
					if !errors.Is(err, eventbus.ErrTimeout) || !time.Now().Equal(deadline) {
						t.Errorf("reader %d round %d: %v at %v, want ErrTimeout at %v", i, round, err, time.Now(), deadline)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

func TestNextBeforeCoalescing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		s := subscribe(t, b, "s1", eventbus.SubscribeOptions{
			Coalesce: latestWins{}, Throttle: 10 * time.Second,
		})
		start := time.Now()
		ids := publish(t, b, "s1", 3)
		// The first group after a quiet window goes out at once.
		r := <-nextBefore(s, start.Add(time.Second))
		require.NoError(t, r.err)
		assert.Equal(t, ids[2], r.ev.ID)
		assert.Equal(t, 3, r.ev.Count)
		// The next one is held for the window; a shorter deadline times out
		// and leaves it held.
		ids = publish(t, b, "s1", 2)
		r = <-nextBefore(s, start.Add(time.Second))
		require.ErrorIs(t, r.err, eventbus.ErrTimeout)
		assert.Equal(t, start.Add(time.Second), r.at)
		r = <-nextBefore(s, start.Add(time.Hour))
		require.NoError(t, r.err)
		assert.Equal(t, ids[1], r.ev.ID)
		assert.Equal(t, 2, r.ev.Count)
		assert.Equal(t, start.Add(10*time.Second), r.at, "handed out when its window ends")
	})
}

// wallShifted returns t with its wall clock reading moved by d and its
// monotonic reading kept: what time.Now returns when its thread is
// preempted between its two clock reads (the wall one first), or when the
// wall clock is stepped. No API makes one, so it writes time.Time's
// monotonic field (unsafe), and checks that it did what it says.
func wallShifted(t *testing.T, at time.Time, d time.Duration) time.Time {
	t.Helper()
	require.Contains(t, at.String(), " m=", "needs a monotonic reading")
	type timeLayout struct { // time.Time's fields
		wall uint64
		ext  int64 // the monotonic reading, when wall's top bit is set
		loc  *time.Location
	}
	u := at.Add(d)
	(*timeLayout)(unsafe.Pointer(&u)).ext = (*timeLayout)(unsafe.Pointer(&at)).ext
	require.Zero(t, u.Sub(at), "same monotonic reading")
	require.Equal(t, int64(d), u.UnixNano()-at.UnixNano(), "wall reading moved")
	return u
}

// A deadline means what time.Time says it means: its monotonic reading.
// time.Now reads the wall clock, then the monotonic one; under load the
// thread can be preempted between the two, and the deadline then carries a
// wall reading earlier than its monotonic one. NextBefore compared the
// wall reading (UnixNano) with the wall clock, so it returned ErrTimeout
// that much before the deadline (TestNextBeforeConcurrent failed with
// "ErrTimeout 85µs before its deadline" about once in a hundred loaded
// runs); a wall clock step moved deadlines too. Here the readings are
// pulled apart by an hour, so the wall reading alone says long past (or an
// hour away). On the real clock: a synctest bubble's times have no
// monotonic reading (there NextBefore measures by the wall clock, as
// TestNextBeforeTimesOutAtTheDeadlineNotBefore checks).
func TestNextBeforeMeasuresTheDeadlineByItsMonotonicReading(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s1", eventbus.SubscribeOptions{NoReplay: true})
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		deadline := wallShifted(t, time.Now().Add(100*time.Millisecond), skew)
		var r waitResult
		select {
		case r = <-nextBefore(s, deadline):
		case <-time.After(waitFor):
			t.Fatalf("wall reading moved by %v: no return within %v of a 100 ms deadline", skew, waitFor)
		}
		require.ErrorIs(t, r.err, eventbus.ErrTimeout, "wall reading moved by %v", skew)
		assert.False(t, r.at.Before(deadline), "wall reading moved by %v: returned %v before the deadline", skew, deadline.Sub(r.at))
	}
}

// latestWins merges every "msg" event into the last one.
type latestWins struct{}

func (latestWins) Key(ev eventbus.Event) (string, bool) { return ev.Type, false }

func (latestWins) Merge(_ string, evs []eventbus.Event) (json.RawMessage, error) {
	return evs[len(evs)-1].Data, nil
}

// Readers waiting with short, moving deadlines while publishers publish and
// subscriptions come and go (real time, under -race): every reader gets
// every event of its session exactly once and in order, a timeout never
// comes before its deadline, and nothing is left in the deadline queue's
// way when the subscriptions end (goleak checks the rest).
func TestNextBeforeConcurrent(t *testing.T) {
	b := newBus(t, eventbus.Options{MaxSubscribers: 100})
	const readers, events = 8, 400
	var wg sync.WaitGroup
	// A reader that reaches its deadline says so here; the publisher
	// pauses until one has (instead of for a guessed while), so timeouts
	// and frames interleave.
	timedOut := make(chan struct{}, 1)
	for i := range readers {
		s := subscribe(t, b, "s1", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: events + 10})
		wg.Go(func() {
			var last uint64
			got, timeouts := 0, 0
			for got < events {
				d := time.Duration(50+i*37) * time.Microsecond
				deadline := time.Now().Add(d)
				ev, err := s.NextBefore(deadline)
				if errors.Is(err, eventbus.ErrTimeout) {
					if now := time.Now(); now.Before(deadline) {
						t.Errorf("reader %d: ErrTimeout %v before its deadline", i, deadline.Sub(now))
						return
					}
					timeouts++
					select {
					case timedOut <- struct{}{}:
					default:
					}
					continue
				}
				if err != nil {
					t.Errorf("reader %d after %d events: %v", i, got, err)
					return
				}
				if ev.ID <= last {
					t.Errorf("reader %d: id %d after %d", i, ev.ID, last)
					return
				}
				last = ev.ID
				got++
			}
		})
	}
	// Churn: subscriptions that park with deadlines and are closed or
	// cancelled while parked.
	wg.Go(func() {
		for j := range 50 {
			ctx, cancel := context.WithCancel(context.Background())
			s, err := b.Subscribe(ctx, "s1", eventbus.SubscribeOptions{NoReplay: true})
			if err != nil {
				t.Error(err)
				cancel()
				return
			}
			done := make(chan struct{})
			parked := make(chan struct{}) // closed once it has waited out a deadline
			go func() {
				defer close(done)
				var once sync.Once
				for {
					_, err := s.NextBefore(time.Now().Add(time.Duration(j%7+1) * 100 * time.Microsecond))
					if err != nil && !errors.Is(err, eventbus.ErrTimeout) {
						return
					}
					if err != nil {
						once.Do(func() { close(parked) })
					}
				}
			}()
			select {
			case <-parked:
			case <-time.After(waitFor):
				t.Errorf("churn %d: NextBefore never reached its deadline", j)
			}
			if j%2 == 0 {
				s.Close()
			} else {
				cancel()
			}
			<-done
			cancel()
		}
	})
	for i := range events {
		if _, err := b.Publish("s1", "msg", 1); err != nil {
			t.Fatal(err)
		}
		if i < events-1 && rand.IntN(4) == 0 { // (after the last, the readers are done)
			select { // forget a timeout from before this event
			case <-timedOut:
			default:
			}
			select {
			case <-timedOut:
			case <-time.After(waitFor):
				t.Fatal("no reader reached its deadline while the publisher paused")
			}
		}
	}
	wg.Wait()
}

// TestNextBeforeDeadlineOutsideInt64: a deadline that Unix
// nanoseconds in an int64 cannot hold (after 2262 or before 1678) must mean
// what it says, as it does for context.WithDeadline: one centuries away
// waits (time.Time.UnixNano wrapped it to a past instant, and NextBefore
// returned ErrTimeout at once — a heartbeat loop given "no deadline" as the
// year 3000 spun), one centuries ago is past (it wrapped to a future
// instant, and NextBefore blocked instead of returning ErrTimeout). In a
// synctest bubble, so "returns at once" and "is still waiting" are facts,
// not timings.
func TestNextBeforeDeadlineOutsideInt64(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t, eventbus.Options{})
		sub := subscribe(t, bus, "s", eventbus.SubscribeOptions{NoReplay: true})

		for _, past := range []time.Time{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)} {
			done := make(chan error, 1)
			go func() { _, err := sub.NextBefore(past); done <- err }()
			synctest.Wait()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, eventbus.ErrTimeout, "deadline %v", past)
			default:
				publish(t, bus, "s", 1) // let it go, then fail
				<-done
				t.Errorf("NextBefore(%v) with nothing queued waits instead of returning ErrTimeout", past)
			}
		}

		for _, future := range []time.Time{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0)} {
			type result struct {
				ev  eventbus.Event
				err error
			}
			done := make(chan result, 1)
			go func() { ev, err := sub.NextBefore(future); done <- result{ev, err} }()
			synctest.Wait()
			select {
			case r := <-done:
				t.Errorf("NextBefore(%v) with nothing queued returned at once: %v", future, r.err)
				continue
			default:
			}
			id := publish(t, bus, "s", 1)[0]
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, id, r.ev.ID)
		}
		sub.Close()
	})
}
