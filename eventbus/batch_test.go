package eventbus_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// batchAll reads every frame ready now with NextBatch into buffers of size
// n (a deadline already past: ready frames, then ErrTimeout or the end
// reason), and returns them with the error that stopped the reads.
func batchAll(t testing.TB, s *eventbus.Subscription, n int) ([]eventbus.Event, error) {
	t.Helper()
	buf := make([]eventbus.Event, n)
	var out []eventbus.Event
	past := time.Now().Add(-time.Second)
	for {
		k, err := s.NextBatch(past, buf)
		if err != nil {
			require.Zero(t, k, "NextBatch returned %d frames with %v", k, err)
			return out, err
		}
		require.True(t, k >= 1 && k <= n, "NextBatch returned %d frames into %d", k, n)
		out = append(out, buf[:k]...)
	}
}

// nextAll reads every frame ready with Next, and returns them with the
// error that stopped the reads: the end's reason, or ErrTimeout when
// nothing more came for 100 ms.
func nextAll(s *eventbus.Subscription) ([]eventbus.Event, error) {
	var out []eventbus.Event
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		ev, err := s.Next(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		if err != nil {
			if timedOut {
				err = eventbus.ErrTimeout
			}
			return out, err
		}
		out = append(out, ev)
	}
}

// untimed drops the frames' times: two subscriptions made one after the
// other date their synthetic frames apart.
func untimed(evs []eventbus.Event) []eventbus.Event {
	out := make([]eventbus.Event, len(evs))
	for i, e := range evs {
		e.Time = time.Time{}
		out[i] = e
	}
	return out
}

// NextBatch hands out exactly the frames TryNext does, in the same order,
// whatever the size of its buffer: two subscriptions with the same options
// on one bus, one read frame by frame, the other in batches; and so does
// Next (a third subscription, with the buffer of 1).
func TestNextBatchSameFramesAsTryNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   eventbus.Options
		pre   func(t *testing.T, b *eventbus.Bus) // before the subscribes
		opts  eventbus.SubscribeOptions
		post  func(t *testing.T, b *eventbus.Bus) // after them, before the reads
		want  []string                            // describe() of the frames
		err   error                               // what stops the reads
		check func(t *testing.T, got []eventbus.Event)
	}{
		{
			name: "replay from a cursor, replay_complete, then live",
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 10) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(3)},
			post: func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 3) },
			want: []string{"4r", "5r", "6r", "7r", "8r", "9r", "10r", "replay_complete", "11", "12", "13"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "no cursor, whole history: the ring, no replay_complete",
			cfg:  eventbus.Options{ReplayBufferSize: 5},
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 5) },
			want: []string{"1r", "2r", "3r", "4r", "5r"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "no cursor, older history evicted: replay_complete says so",
			cfg:  eventbus.Options{ReplayBufferSize: 5},
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 8) },
			want: []string{"4r", "5r", "6r", "7r", "8r", "replay_complete"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "ring_evicted leads the replay",
			cfg:  eventbus.Options{ReplayBufferSize: 5},
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 10) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(2)},
			post: func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 1) },
			want: []string{"state_resync_required:ring_evicted", "6r", "7r", "8r", "9r", "10r", "replay_complete", "11"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "epoch_reset leads the whole buffer",
			cfg:  eventbus.Options{ReplayBufferSize: 5},
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 3) },
			opts: eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "other", ID: 2}},
			want: []string{"state_resync_required:epoch_reset", "1r", "2r", "3r", "replay_complete"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "the replay byte budget cuts the replay",
			cfg:  eventbus.Options{ReplayBudgetBytes: 20}, // {"n":i} is 7 or 8 bytes
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 6) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(0)},
			want: []string{"1r", "2r", "state_resync_required:replay_budget_exceeded", "replay_complete"},
			err:  eventbus.ErrTimeout,
		},
		{
			// The largest payload the bus stored decides whether the budget's
			// walk can be skipped: here it cannot, and the cut falls before it.
			name: "the budget cuts before a large payload after small ones",
			cfg:  eventbus.Options{ReplayBudgetBytes: 50},
			pre: func(t *testing.T, b *eventbus.Bus) {
				publish(t, b, "s", 3)
				_, err := b.Publish("s", "msg", strings.Repeat("x", 100))
				require.NoError(t, err)
			},
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(0)},
			want: []string{"1r", "2r", "3r", "state_resync_required:replay_budget_exceeded", "replay_complete"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "type filter on the replay and live",
			pre: func(t *testing.T, b *eventbus.Bus) {
				for _, typ := range []string{"a", "b", "a", "b"} {
					_, err := b.Publish("s", typ, 1)
					require.NoError(t, err)
				}
			},
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(0), Types: []string{"a"}},
			post: func(t *testing.T, b *eventbus.Bus) {
				for _, typ := range []string{"b", "a"} {
					_, err := b.Publish("s", typ, 1)
					require.NoError(t, err)
				}
			},
			want: []string{"1r:a", "3r:a", "replay_complete", "6:a"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "drop_newest announces the drops after the replay",
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 2) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(0), MaxQueued: 2, Policy: eventbus.DropNewest,
				SlowClientWarning: new(bool)},
			post: func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 5) },
			want: []string{"1r", "2r", "replay_complete", "3", "4", "state_resync_required:events_dropped"},
			err:  eventbus.ErrTimeout,
		},
		{
			name: "coalescing merges the replay and live runs",
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 4) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(0), Coalesce: latestWins{}},
			post: func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 3) },
			want: []string{"4r", "replay_complete", "7"},
			err:  eventbus.ErrTimeout,
			check: func(t *testing.T, got []eventbus.Event) {
				assert.Equal(t, 4, got[0].Count)
				assert.Equal(t, 3, got[2].Count)
			},
		},
		{
			name: "the session's end after what was queued",
			pre:  func(t *testing.T, b *eventbus.Bus) { publish(t, b, "s", 2) },
			opts: eventbus.SubscribeOptions{Cursor: eventbus.At(1)},
			post: func(t *testing.T, b *eventbus.Bus) {
				publish(t, b, "s", 1)
				require.NoError(t, b.CloseSession("s"))
			},
			want: []string{"2r", "replay_complete", "3", "4:session_closed"},
			err:  eventbus.ErrSessionClosed,
		},
	}
	for _, tc := range tests {
		for _, n := range []int{1, 2, 3, 64} {
			t.Run(fmt.Sprintf("%s/buf=%d", tc.name, n), func(t *testing.T) {
				t.Parallel()
				b := newBus(t, tc.cfg)
				if tc.pre != nil {
					tc.pre(t, b)
				}
				ref := subscribe(t, b, "s", tc.opts)
				bat := subscribe(t, b, "s", tc.opts)
				var nxt *eventbus.Subscription
				if n == 1 {
					nxt = subscribe(t, b, "s", tc.opts) // and once read with Next
				}
				if tc.post != nil {
					tc.post(t, b)
				}
				want := drain(ref)
				assert.Equal(t, tc.want, describe(want))
				if tc.err != eventbus.ErrTimeout {
					assert.ErrorIs(t, ref.Err(), tc.err)
				}
				got, err := batchAll(t, bat, n)
				assert.ErrorIs(t, err, tc.err, "buffer of %d", n)
				assert.Equal(t, untimed(want), untimed(got), "buffer of %d", n)
				if tc.check != nil && len(got) == len(want) {
					tc.check(t, got)
				}
				if nxt != nil {
					got, err := nextAll(nxt)
					assert.ErrorIs(t, err, tc.err, "Next")
					assert.Equal(t, untimed(want), untimed(got), "Next")
				}
				assert.Zero(t, b.Stats().Guarded)
			})
		}
	}
}

// A buffer of length 0 is refused, naming the problem; a quiet
// subscription times out with nothing written and stays usable.
func TestNextBatchEmptyBufferAndTimeout(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	n, err := s.NextBatch(time.Time{}, nil)
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.ErrorContains(t, err, "length 0")
	assert.Zero(t, n)

	buf := make([]eventbus.Event, 4)
	n, err = s.NextBatch(time.Now().Add(10*time.Millisecond), buf)
	require.ErrorIs(t, err, eventbus.ErrTimeout)
	assert.Zero(t, n)
	assert.Equal(t, eventbus.Event{}, buf[0], "nothing written on a timeout")

	publish(t, b, "s", 2)
	n, err = s.NextBatch(time.Time{}, buf)
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "2"}, describe(buf[:n]))

	// A deadline before the bus was made asks for what is ready.
	n, err = s.NextBatch(time.Unix(1, 0), buf)
	require.ErrorIs(t, err, eventbus.ErrTimeout)
	assert.Zero(t, n)
	publish(t, b, "s", 1)
	n, err = s.NextBatch(time.Unix(1, 0), buf)
	require.NoError(t, err)
	assert.Equal(t, []string{"3"}, describe(buf[:n]))
}

// A reader parked in NextBatch is woken by a publish and by the end of its
// subscription.
func TestNextBatchWakes(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	type result struct {
		evs []eventbus.Event
		err error
	}
	read := func() <-chan result {
		out := make(chan result, 1)
		go func() {
			buf := make([]eventbus.Event, 8)
			n, err := s.NextBatch(time.Now().Add(waitFor), buf)
			out <- result{buf[:n], err}
		}()
		return out
	}
	r := read()
	publish(t, b, "s", 1)
	select {
	case got := <-r:
		require.NoError(t, got.err)
		assert.Equal(t, []string{"1"}, describe(got.evs))
	case <-time.After(waitFor):
		t.Fatal("a publish did not wake NextBatch")
	}
	r = read()
	s.Close()
	select {
	case got := <-r:
		assert.ErrorIs(t, got.err, eventbus.ErrUnsubscribed)
		assert.Empty(t, got.evs)
	case <-time.After(waitFor):
		t.Fatal("Close did not wake NextBatch")
	}
}

// The seam under a running publisher, read in batches: every id after the
// cursor exactly once and in order, the replayed ones (up to replay_complete's
// last id) flagged as replay and every later one not, replay_complete
// between them.
func TestNextBatchSeamUnderPublisher(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	publish(t, b, "s", 300)
	const more = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < more; i++ {
			if _, err := b.Publish("s", "msg", i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(100), MaxQueued: 1_000_000})
	require.NoError(t, err)
	defer s.Close()
	buf := make([]eventbus.Event, 64)
	next, last := uint64(101), uint64(300+more)
	var lastReplayed uint64
	complete := false
	for next <= last {
		n, err := s.NextBatch(time.Now().Add(waitFor), buf)
		require.NoError(t, err, "waiting for id %d", next)
		for _, ev := range buf[:n] {
			if ev.Type == frame.TypeReplayComplete {
				require.False(t, complete, "two replay_complete frames")
				complete = true
				lastReplayed = decode[frame.ReplayCompleteData](t, ev).LastReplayedEventID
				require.Equal(t, next-1, lastReplayed, "replay_complete after the last replayed id")
				continue
			}
			require.Equal(t, next, ev.ID, "ids in order, each once")
			require.Equal(t, !complete, ev.Replay, "id %d: replay flag", ev.ID)
			next++
		}
	}
	wg.Wait()
	require.True(t, complete)
	assert.GreaterOrEqual(t, lastReplayed, uint64(300))
	assert.Zero(t, b.Stats().Guarded)
}

// Reading a replay with NextBatch allocates nothing per frame.
func TestNextBatchReplayAllocations(t *testing.T) {
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	publish(t, b, "s", 1000)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
	buf := make([]eventbus.Event, 10)
	past := time.Now().Add(-time.Second)
	allocs := testing.AllocsPerRun(90, func() {
		n, err := s.NextBatch(past, buf)
		if err != nil || n != len(buf) || !buf[0].Replay {
			t.Fatalf("NextBatch: %d frames, %v", n, err)
		}
	})
	assert.Zero(t, allocs)
}

// What a NextBatch takes out of the live limits counts from its return:
// a full queue read in one batch leaves room for as many again, with no
// eviction and one slow_client_warning per episode (each filling passes
// 75 %; emptying it re-arms the warning), whatever the buffer's size.
func TestNextBatchFreesTheLiveQueue(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 64} {
		t.Run(fmt.Sprintf("buf=%d", n), func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 4, Policy: eventbus.DropSubscriber})
			for round := range 5 {
				publish(t, b, "s", 4)
				got, err := batchAll(t, s, n)
				require.ErrorIs(t, err, eventbus.ErrTimeout, "round %d", round)
				d := describe(got)
				require.Len(t, d, 5, "round %d: %v", round, d)
				assert.Equal(t, frame.TypeSlowClientWarning, got[3].Type, "round %d: %v", round, d)
			}
			require.NoError(t, s.Err())
		})
	}
}
