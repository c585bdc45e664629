package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/internal/testkit"
)

// MaxQueued=2, nobody reading, publish 1, 2, 3.
func TestEvictionSequence(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{OverflowPolicy: eventbus.DropSubscriber})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 2})
	for i := 0; i < 3; i++ {
		_, err := b.Publish("s", "msg", nil)
		require.NoError(t, err)
	}
	// The slot is free before the consumer reads anything.
	assert.Empty(t, testkit.SubscriberCounts(b))
	assert.True(t, ended(s))

	got, err := readToEnd(t, s)
	require.ErrorIs(t, err, eventbus.ErrEvicted)
	require.ErrorIs(t, s.Err(), eventbus.ErrEvicted)
	require.Equal(t, []string{"1", "2", "slow_client_warning", "client_evicted"}, describe(got))
	assert.Equal(t, frame.SlowClientWarningData{
		QueueFigures: frame.QueueFigures{QueueSize: 2, MaxQueued: 2, MaxQueuedBytes: eventbus.Options{}.WithDefaults().MaxQueuedBytes},
		LastEventID:  2, Threshold: "frames",
	}, decode[frame.SlowClientWarningData](t, got[2]))
	assert.Equal(t, frame.ClientEvictedData{
		QueueFigures: frame.QueueFigures{QueueSize: 2, MaxQueued: 2, MaxQueuedBytes: eventbus.Options{}.WithDefaults().MaxQueuedBytes},
		Reason:       frame.ReasonQueueOverflow, DroppedAfter: 3,
	}, decode[frame.ClientEvictedData](t, got[3]))
	st := b.Stats()
	assert.Equal(t, uint64(1), st.Evicted)
	assert.Equal(t, uint64(1), st.Warnings)
	assert.Equal(t, uint64(2), st.Delivered)
	assert.Zero(t, st.Subscribers)
}

// A stalled subscriber is warned once and evicted; the others and the
// publisher do not notice; it resumes from the ring.
func TestStalledSubscriber(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 100, OverflowPolicy: eventbus.DropSubscriber})
	a := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 8})
	fast := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 8})
	for i := uint64(1); i <= 100; i++ {
		ev, err := b.Publish("s", "msg", nil)
		require.NoError(t, err)
		require.Equal(t, i, ev.ID)
		// The reading subscriber keeps up and is never disturbed.
		require.Equal(t, []string{ev2s(i)}, describe([]eventbus.Event{next(t, fast)}))
	}
	require.NoError(t, fast.Err())

	got, err := readToEnd(t, a)
	require.ErrorIs(t, err, eventbus.ErrEvicted)
	assert.Equal(t, 1, count(got, frame.TypeSlowClientWarning))
	assert.Equal(t, seq(1, 8), ids(got))
	ev := find(t, got, frame.TypeClientEvicted)
	assert.Equal(t, uint64(9), decode[frame.ClientEvictedData](t, ev).DroppedAfter)

	r := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(8)})
	rest := drain(r)
	assert.Equal(t, seq(9, 100), ids(rest))
	assert.Equal(t, frame.TypeReplayComplete, rest[len(rest)-1].Type)
	assert.Equal(t, 0, count(rest, frame.TypeStateResyncRequired))
}

func ev2s(id uint64) string { return describe([]eventbus.Event{{ID: id, Type: "msg"}})[0] }

// One slow_client_warning per episode; re-armed only when both axes are
// at or below 37.5 %.
func TestWarningHysteresis(t *testing.T) {
	t.Parallel()
	type step struct {
		publish, read int // read counts live events, frames between them are read too
	}
	tests := []struct {
		name     string
		opts     eventbus.SubscribeOptions
		size     int // payload bytes
		steps    []step
		warnings int
		th       []string
	}{
		{"frames: one episode", eventbus.SubscribeOptions{MaxQueued: 8}, 10,
			[]step{{6, 0}, {0, 2}, {2, 0}}, 1, []string{"frames"}},
		{"frames: down to 4 does not re-arm", eventbus.SubscribeOptions{MaxQueued: 8}, 10,
			[]step{{6, 0}, {0, 2}, {2, 0}, {0, 4}, {2, 0}}, 1, []string{"frames"}},
		{"frames: down to 3 re-arms", eventbus.SubscribeOptions{MaxQueued: 8}, 10,
			[]step{{6, 0}, {0, 3}, {3, 0}}, 2, []string{"frames", "frames"}},
		{"bytes alone", eventbus.SubscribeOptions{MaxQueued: 100, MaxQueuedBytes: 400}, 100,
			[]step{{3, 0}}, 1, []string{"bytes"}},
		{"both", eventbus.SubscribeOptions{MaxQueued: 4, MaxQueuedBytes: 400}, 100,
			[]step{{3, 0}}, 1, []string{"frames_and_bytes"}},
		{"bytes: frames low but bytes high does not re-arm", eventbus.SubscribeOptions{MaxQueued: 8, MaxQueuedBytes: 800}, 100,
			// 6 queued (warn on both), read 3 → 3 frames (37.5 %) and 300 B (37.5 %): re-armed.
			[]step{{6, 0}, {0, 3}, {3, 0}}, 2, []string{"frames_and_bytes", "frames_and_bytes"}},
		{"bytes: big events keep the byte axis high", eventbus.SubscribeOptions{MaxQueued: 16, MaxQueuedBytes: 800}, 200,
			// 3 × 200 B = 600 B (75 %): warn on bytes; read 1 → 400 B (50 %); a small
			// number of frames does not re-arm while bytes are above 37.5 %.
			[]step{{3, 0}, {0, 1}, {1, 0}}, 1, []string{"bytes"}},
		{"switched off", eventbus.SubscribeOptions{MaxQueued: 4, SlowClientWarning: ptr(false)}, 10,
			[]step{{4, 0}}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			s := subscribe(t, b, "s", tt.opts)
			var got []eventbus.Event
			for _, st := range tt.steps {
				for i := 0; i < st.publish; i++ {
					_, err := b.Publish("s", "msg", payload(tt.size))
					require.NoError(t, err)
				}
				for n := 0; n < st.read; {
					ev := next(t, s)
					got = append(got, ev)
					if ev.ID != 0 {
						n++
					}
				}
			}
			got = append(got, drain(s)...)
			require.NoError(t, s.Err(), "%v", describe(got))
			var th []string
			for _, e := range got {
				if e.Type == frame.TypeSlowClientWarning {
					w := decode[frame.SlowClientWarningData](t, e)
					th = append(th, w.Threshold)
					assert.Equal(t, tt.opts.MaxQueued, w.MaxQueued)
				}
			}
			assert.Equal(t, tt.th, th, "%v", describe(got))
			assert.Equal(t, uint64(tt.warnings), b.Stats().Warnings)
		})
	}
}

func TestByteLimit(t *testing.T) {
	t.Parallel()
	t.Run("overflow evicts with queue_bytes_overflow", func(t *testing.T) {
		t.Parallel()
		b := newBus(t, eventbus.Options{OverflowPolicy: eventbus.DropSubscriber})
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 100, MaxQueuedBytes: 400})
		for i := 0; i < 5; i++ {
			_, err := b.Publish("s", "msg", payload(100))
			require.NoError(t, err)
		}
		got, err := readToEnd(t, s)
		require.ErrorIs(t, err, eventbus.ErrEvicted)
		assert.Equal(t, seq(1, 4), ids(got))
		ev := decode[frame.ClientEvictedData](t, find(t, got, frame.TypeClientEvicted))
		assert.Equal(t, frame.ClientEvictedData{
			QueueFigures: frame.QueueFigures{QueueSize: 4, MaxQueued: 100, QueuedBytes: 400, MaxQueuedBytes: 400},
			Reason:       frame.ReasonQueueBytesOverflow, DroppedAfter: 5,
		}, ev)
	})
	t.Run("one oversized event fits an empty queue", func(t *testing.T) {
		t.Parallel()
		b := newBus(t, eventbus.Options{})
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueuedBytes: 50})
		_, err := b.Publish("s", "msg", payload(100))
		require.NoError(t, err)
		assert.Equal(t, []string{"1", "slow_client_warning"}, describe(drain(s)))
		_, err = b.Publish("s", "msg", payload(100))
		require.NoError(t, err)
		assert.Equal(t, []string{"2", "slow_client_warning"}, describe(drain(s)), "a new episode, not an eviction")
		require.NoError(t, s.Err())
	})
}

// Replayed and synthetic frames never count against the live limits.
func TestReplayNeverEvicts(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s", 10)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 4, Cursor: eventbus.At(0)})
	publish(t, b, "s", 1)
	got := drain(s)
	assert.Equal(t, []string{"1r", "2r", "3r", "4r", "5r", "6r", "7r", "8r", "9r", "10r", "replay_complete", "11"}, describe(got))
	require.NoError(t, s.Err())
	st := b.Stats()
	assert.Zero(t, st.Warnings)
	assert.Zero(t, st.Evicted)
	assert.Equal(t, uint64(10), st.Replayed)
}

func TestDropPolicies(t *testing.T) {
	t.Parallel()
	dropped := func(last, first, lastD uint64, n int) frame.ResyncData {
		return frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: last,
			FirstDroppedID: first, LastDroppedID: lastD, DroppedCount: n}
	}
	tests := []struct {
		name   string
		policy eventbus.OverflowPolicy
		warn   bool
		want   []string
		drops  []frame.ResyncData
	}{
		{"drop_newest", eventbus.DropNewest, false,
			[]string{"1", "2", "3", "4", "state_resync_required:events_dropped", "11"},
			[]frame.ResyncData{dropped(4, 5, 10, 6)}},
		{"drop_oldest", eventbus.DropOldest, false,
			[]string{"state_resync_required:events_dropped", "7", "8", "9", "10", "11"},
			[]frame.ResyncData{dropped(0, 1, 6, 6)}},
		{"drop_newest with warning", eventbus.DropNewest, true,
			[]string{"1", "2", "3", "slow_client_warning", "4", "state_resync_required:events_dropped", "11"},
			[]frame.ResyncData{dropped(4, 5, 10, 6)}},
		// One run of losses is one frame, even across the warning.
		{"drop_oldest with warning", eventbus.DropOldest, true,
			[]string{"state_resync_required:events_dropped", "slow_client_warning", "7", "8", "9", "10", "11"},
			[]frame.ResyncData{dropped(0, 1, 6, 6)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 4, Policy: tt.policy, SlowClientWarning: &tt.warn})
			publish(t, b, "s", 10)
			got := drain(s)
			publish(t, b, "s", 1)
			got = append(got, drain(s)...)
			require.Equal(t, tt.want, describe(got))
			var drops []frame.ResyncData
			for _, e := range got {
				if e.Type == frame.TypeStateResyncRequired {
					drops = append(drops, decode[frame.ResyncData](t, e))
				}
			}
			assert.Equal(t, tt.drops, drops)
			require.NoError(t, s.Err())
			st := b.Stats()
			assert.Equal(t, uint64(6), st.Dropped)
			assert.Zero(t, st.Evicted)
		})
	}
}

// drop_oldest never drops what the consumer already took out of the queue
// (a batch it is still reading counts against the limit): the oldest
// still queued goes.
func TestDropOldestWithTakenBatch(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 2, Policy: eventbus.DropOldest, SlowClientWarning: ptr(false)})
	publish(t, b, "s", 2)
	first := next(t, s) // takes the whole queue (1, 2) as one batch
	publish(t, b, "s", 3)
	got := append([]eventbus.Event{first}, drain(s)...)
	// 3 and 4 each made room for the next; 2 was already the consumer's.
	assert.Equal(t, []string{"1", "2", "state_resync_required:events_dropped", "5"}, describe(got))
	assert.Equal(t, frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: 2,
		FirstDroppedID: 3, LastDroppedID: 4, DroppedCount: 2}, decode[frame.ResyncData](t, got[2]))
}

// Droppable types are dropped for a slow subscriber at the warning level
// while other types still arrive.
func TestDroppableTypes(t *testing.T) {
	t.Parallel()
	for _, policy := range []eventbus.OverflowPolicy{eventbus.DropSubscriber, eventbus.DropNewest, eventbus.DropOldest} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{DroppableTypes: []string{"delta"}})
			s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 4, Policy: policy})
			for i := 0; i < 6; i++ {
				_, err := b.Publish("s", "delta", "x")
				require.NoError(t, err)
			}
			_, err := b.Publish("s", "final", "done")
			require.NoError(t, err)
			got := drain(s)
			require.Equal(t, []string{"1:delta", "2:delta", "3:delta", "slow_client_warning",
				"state_resync_required:events_dropped", "7:final"}, describe(got))
			assert.Equal(t, frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: 3,
				FirstDroppedID: 4, LastDroppedID: 6, DroppedCount: 3}, decode[frame.ResyncData](t, got[4]))
			require.NoError(t, s.Err())
			// Caught up, deltas flow again.
			_, err = b.Publish("s", "delta", "y")
			require.NoError(t, err)
			assert.Equal(t, []string{"8:delta"}, describe(drain(s)))
			assert.Equal(t, uint64(3), b.Stats().Dropped)
		})
	}
}

func TestReplayBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		budget int64
		opts   eventbus.SubscribeOptions
		want   []string
		resync frame.ResyncData
		done   frame.ReplayCompleteData
	}{
		{"no cursor", 400, eventbus.SubscribeOptions{},
			[]string{"1r", "2r", "3r", "4r", "state_resync_required:replay_budget_exceeded", "replay_complete", "11"},
			frame.ResyncData{Reason: frame.ReasonReplayBudgetExceeded, LastDeliveredID: 4, CompleteFromID: 11, SkippedCount: 6},
			frame.ReplayCompleteData{LastReplayedEventID: 4, ReplayedCount: 4, FirstReplayedEventID: 1}},
		{"cursor", 400, eventbus.SubscribeOptions{Cursor: eventbus.At(5)},
			[]string{"6r", "7r", "8r", "9r", "state_resync_required:replay_budget_exceeded", "replay_complete", "11"},
			frame.ResyncData{Reason: frame.ReasonReplayBudgetExceeded, LastDeliveredID: 9, CompleteFromID: 11, SkippedCount: 1},
			frame.ReplayCompleteData{LastReplayedEventID: 9, ReplayedCount: 4, FirstReplayedEventID: 6}},
		{"at least one event", 50, eventbus.SubscribeOptions{},
			[]string{"1r", "state_resync_required:replay_budget_exceeded", "replay_complete", "11"},
			frame.ResyncData{Reason: frame.ReasonReplayBudgetExceeded, LastDeliveredID: 1, CompleteFromID: 11, SkippedCount: 9},
			frame.ReplayCompleteData{LastReplayedEventID: 1, ReplayedCount: 1, FirstReplayedEventID: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{ReplayBudgetBytes: tt.budget})
			for i := 0; i < 10; i++ {
				ev, err := b.Publish("s", "msg", payload(100))
				require.NoError(t, err)
				require.Len(t, ev.Data, 100)
			}
			s := subscribe(t, b, "s", tt.opts)
			_, err := b.Publish("s", "msg", payload(100))
			require.NoError(t, err)
			got := drain(s)
			require.Equal(t, tt.want, describe(got))
			n := len(got)
			assert.Equal(t, tt.resync, decode[frame.ResyncData](t, got[n-3]))
			assert.Equal(t, tt.done, decode[frame.ReplayCompleteData](t, got[n-2]))
		})
	}
	t.Run("within budget", func(t *testing.T) {
		t.Parallel()
		b := newBus(t, eventbus.Options{ReplayBudgetBytes: 1000})
		for i := 0; i < 10; i++ {
			_, err := b.Publish("s", "msg", payload(100))
			require.NoError(t, err)
		}
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
		assert.Equal(t, seq(1, 10), ids(drain(s)))
	})
}

// The subscriber cap under a race: exactly MaxSubscribers are admitted,
// and a freed slot admits exactly one more.
func TestSubscriberCap(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxSubscribers: 5, OverflowPolicy: eventbus.DropSubscriber})
	attempt := func(n int) (ok []*eventbus.Subscription, cancels []context.CancelFunc, errs []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(context.Background())
				<-start
				s, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					cancel()
					errs = append(errs, err)
					return
				}
				ok, cancels = append(ok, s), append(cancels, cancel)
			}()
		}
		close(start)
		wg.Wait()
		return ok, cancels, errs
	}
	ok, cancels, errs := attempt(50)
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	require.Len(t, ok, 5)
	require.Len(t, errs, 45)
	for _, err := range errs {
		require.ErrorIs(t, err, eventbus.ErrSubscriberLimit)
		// The limit in force and the session, named by the error.
		assert.Equal(t, 5, b.Options().MaxSubscribers)
		assert.Equal(t, `eventbus: subscriber limit exceeded: session "s" has 5 subscribers (the limit)`, err.Error())
	}
	assert.Equal(t, map[string]int{"s": 5}, testkit.SubscriberCounts(b))

	cancels[0]()
	waitEnded(t, ok[0])
	more, moreCancels, errs := attempt(10)
	defer func() {
		for _, c := range moreCancels {
			c()
		}
	}()
	assert.Len(t, more, 1)
	assert.Len(t, errs, 9)

	// An eviction frees its slot at once, too.
	for _, s := range append(ok[1:], more...) {
		s.Close()
	}
	victim := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 1})
	for i := 0; i < 4; i++ {
		subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 1000})
	}
	_, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSubscriberLimit)
	publish(t, b, "s", 2)
	require.True(t, ended(victim))
	subscribe(t, b, "s", eventbus.SubscribeOptions{})
}

func TestStatsAndDiagnostics(t *testing.T) {
	t.Parallel()
	rec := &diagRecorder{}
	b := newBus(t, eventbus.Options{DroppableTypes: []string{"delta"}, OverflowPolicy: eventbus.DropSubscriber, Diagnostics: slog.New(rec)})
	publish(t, b, "s", 3) // 1..3
	replayer := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(100), Name: "replayer"})
	slow := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 2, NoReplay: true, Name: "slow"})
	dropper := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 4, NoReplay: true, Policy: eventbus.DropNewest, Name: "dropper"})
	for i := 0; i < 3; i++ { // 4, 5, 6
		_, err := b.Publish("s", "delta", nil)
		require.NoError(t, err)
	}
	_, err := b.Publish("s", "final", nil) // 7
	require.NoError(t, err)

	st := b.Stats()
	assert.Equal(t, observe.Stats{
		Sessions: 1, Subscribers: 2, Published: 7,
		Delivered: 4 + 2 + 4, // replayer 4..7, slow 4..5, dropper 4..7
		Replayed:  3,
		Dropped:   1, // slow's 6: a delta at its warning level
		Evicted:   1, // slow at 7
		Warnings:  2, // slow at 5, dropper at 6
		Resyncs:   1, // replayer's epoch_reset
		// three anonymous subscribers attached, one (slow) left
		PresenceChanges: 4,
	}, st)

	diags := rec.all()
	type brief struct {
		Kind       string
		Name       string
		Subscriber uint64
		EventID    uint64
		EventType  string
	}
	var got []brief
	for _, d := range diags {
		assert.Equal(t, "s", d.Session)
		got = append(got, brief{d.Kind, d.Name, d.Subscriber, d.EventID, d.EventType})
	}
	assert.Equal(t, []brief{
		{"slow_client_warning", "slow", slow.ID(), 5, "delta"},
		{"events_dropped", "slow", slow.ID(), 6, "delta"},
		{"slow_client_warning", "dropper", dropper.ID(), 6, "delta"},
		{"client_evicted", "slow", slow.ID(), 7, "final"},
	}, got)
	assert.Equal(t, frame.QueueFigures{QueueSize: 2, MaxQueued: 2, MaxQueuedBytes: eventbus.Options{}.WithDefaults().MaxQueuedBytes}, diags[3].Queue)
	_ = replayer
}

// An events_dropped frame names the last id the subscriber really received,
// even when drop_oldest later drops the event queued before its run (found
// by the property test: it named the dropped event).
func TestDroppedFrameNamesWhatWasReceived(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{DroppableTypes: []string{"delta"}})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 1, Policy: eventbus.DropOldest})
	for _, typ := range []string{"delta", "delta", "msg"} {
		_, err := b.Publish("s", typ, nil)
		require.NoError(t, err)
	}
	// 1 queued (warning); 2 is a delta at the warning level: dropped; 3
	// overflows: drop_oldest drops 1, the event before 2's run.
	got := drain(s)
	require.Equal(t, []string{"state_resync_required:events_dropped", "slow_client_warning",
		"state_resync_required:events_dropped", "3"}, describe(got))
	for _, i := range []int{0, 2} {
		assert.Zero(t, decode[frame.ResyncData](t, got[i]).LastDeliveredID, "frame %d: nothing was received", i)
	}
}

// limItem is one entry of the model's queue: an event, a targeted frame, a
// synthetic frame (slow_client_warning, client_evicted) or an
// events_dropped run.
type limItem struct {
	kind        byte // 'e' event, 't' targeted, 'f' frame, 'd' dropped run
	id          uint64
	typ         string
	cost        int64
	data        any // the frame's payload ('f')
	first, last uint64
	count       int
}

// TestLiveLimitsExact checks the live limits of one subscriber against
// a model that counts, plainly, what is queued and not yet read — the
// shared queue and the batch the consumer took out of it, as the bus keeps
// them — under drop_oldest, drop_newest and drop_subscriber: every frame
// the consumer reads must be the model's, in order and in full — each
// slow_client_warning (when, after which event, its figures and threshold,
// its re-arm at ≤ 37.5 % on both axes), each client_evicted and its
// figures, each events_dropped run (which ids, merged where they touch,
// lastDeliveredId), each targeted frame, and each ErrQueueFull refusal.
// The publisher keeps a cached copy of the consumer's packed counter and
// reads the real one only near a threshold; a decision taken on the stale
// copy shows here. Publisher and consumer alternate on one goroutine: the
// exactness is not a matter of timing.
func TestLiveLimitsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		maxQ := rapid.IntRange(1, 12).Draw(rt, "maxQueued")
		maxB := int64(rapid.IntRange(1, 300).Draw(rt, "maxBytes"))
		policy := rapid.SampledFrom([]eventbus.OverflowPolicy{eventbus.DropOldest, eventbus.DropNewest,
			eventbus.DropSubscriber}).Draw(rt, "policy")
		bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10_000})
		if err != nil {
			rt.Fatal(err)
		}
		defer bus.Close()
		sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{
			NoReplay: true, MaxQueued: maxQ, MaxQueuedBytes: maxB, Policy: policy})
		if err != nil {
			rt.Fatal(err)
		}

		var (
			q, local     []*limItem
			frames       int64 // live frames queued and not read
			bytes        int64
			warned       bool
			ended        bool
			lastDelivery uint64
			ntarget      int
		)
		figures := func() frame.QueueFigures {
			return frame.QueueFigures{QueueSize: int(frames), MaxQueued: maxQ, QueuedBytes: bytes, MaxQueuedBytes: maxB}
		}
		payload := func(n int) any {
			if n == 0 {
				return nil
			}
			return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
		}
		dropNewest := func(id uint64) {
			if n := len(q); n > 0 && q[n-1].kind == 'd' {
				q[n-1].last, q[n-1].count = id, q[n-1].count+1
				return
			}
			q = append(q, &limItem{kind: 'd', first: id, last: id, count: 1})
		}
		// dropOldest makes room for one more event of cost c by dropping
		// the oldest queued (not yet taken) events; false when none is left.
		dropOldest := func(c int64) bool {
			for {
				if frames < int64(maxQ) && (frames == 0 || bytes+c <= maxB) {
					return true
				}
				i := 0
				for i < len(q) && q[i].kind != 'e' {
					i++
				}
				if i == len(q) {
					return false
				}
				v := q[i]
				frames, bytes = frames-1, bytes-v.cost
				j := i - 1
				for j >= 0 && q[j].kind == 'f' {
					j--
				}
				if j >= 0 && q[j].kind == 'd' {
					q[j].last, q[j].count = v.id, q[j].count+1
					q = append(q[:i], q[i+1:]...)
					continue
				}
				q[i] = &limItem{kind: 'd', first: v.id, last: v.id, count: 1}
			}
		}
		next := func() *limItem {
			for {
				if len(local) > 0 {
					it := local[0]
					local = local[1:]
					if it.kind == 'd' && len(local) == 0 {
						for len(q) > 0 && q[0].kind == 'd' {
							it.last, it.count = q[0].last, it.count+q[0].count
							q = q[1:]
						}
					}
					return it
				}
				if len(q) == 0 {
					return nil
				}
				local, q = q, nil
			}
		}
		read := func(k int) {
			for range k {
				ev, ok := sub.TryNext()
				w := next()
				if !ok || w == nil {
					if ok || w != nil {
						rt.Fatalf("bus has a frame: %v (%s %d), model has %+v", ok, ev.Type, ev.ID, w)
					}
					return
				}
				switch w.kind {
				case 'e':
					if ev.ID != w.id {
						rt.Fatalf("got %s %d %s, want event %d", ev.Type, ev.ID, ev.Data, w.id)
					}
					frames, bytes = frames-1, bytes-w.cost
					lastDelivery = w.id
				case 't':
					if ev.Type != w.typ {
						rt.Fatalf("got %s %d, want targeted %s", ev.Type, ev.ID, w.typ)
					}
					frames, bytes = frames-1, bytes-w.cost
				case 'd':
					var got frame.ResyncData
					want := frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: lastDelivery,
						FirstDroppedID: w.first, LastDroppedID: w.last, DroppedCount: w.count}
					if ev.Type != frame.TypeStateResyncRequired || json.Unmarshal(ev.Data, &got) != nil || got != want {
						rt.Fatalf("got %s %s, want events_dropped %+v", ev.Type, ev.Data, want)
					}
				case 'f':
					wantJSON, _ := json.Marshal(w.data)
					if ev.Type != w.typ || string(ev.Data) != string(wantJSON) {
						rt.Fatalf("got %s %s, want %s %s", ev.Type, ev.Data, w.typ, wantJSON)
					}
				}
			}
		}
		for range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // publish
				n := rapid.SampledFrom([]int{0, 2, 3, 10, 40, 100}).Draw(rt, "size")
				c := int64(n)
				ev, err := bus.Publish("s", "t", payload(n))
				if err != nil {
					rt.Fatal(err)
				}
				if ended {
					continue
				}
				if warned && frames*8 <= int64(maxQ)*3 && bytes*8 <= maxB*3 {
					warned = false
				}
				over, overB := frames >= int64(maxQ), frames > 0 && bytes+c > maxB
				if over || overB {
					switch policy {
					case eventbus.DropNewest:
						dropNewest(ev.ID)
					case eventbus.DropOldest:
						if !dropOldest(c) {
							dropNewest(ev.ID)
						} else {
							q = append(q, &limItem{kind: 'e', id: ev.ID, cost: c})
							frames, bytes = frames+1, bytes+c
						}
					default:
						reason := frame.ReasonQueueOverflow
						if !over {
							reason = frame.ReasonQueueBytesOverflow
						}
						q = append(q, &limItem{kind: 'f', typ: frame.TypeClientEvicted,
							data: frame.ClientEvictedData{QueueFigures: figures(), Reason: reason, DroppedAfter: ev.ID}})
						ended = true
					}
					continue
				}
				q = append(q, &limItem{kind: 'e', id: ev.ID, cost: c})
				frames, bytes = frames+1, bytes+c
				if !warned {
					f, b := frames*4 >= int64(maxQ)*3, bytes*4 >= maxB*3
					if f || b {
						warned = true
						th := "frames"
						switch {
						case f && b:
							th = "frames_and_bytes"
						case b:
							th = "bytes"
						}
						q = append(q, &limItem{kind: 'f', typ: frame.TypeSlowClientWarning,
							data: frame.SlowClientWarningData{QueueFigures: figures(), LastEventID: ev.ID, Threshold: th}})
					}
				}
			case 3: // a targeted frame
				n := rapid.SampledFrom([]int{0, 2, 10, 40}).Draw(rt, "target size")
				c := int64(n)
				ntarget++
				typ := fmt.Sprintf("target%d", ntarget)
				err := bus.SendTo(typ, payload(n), sub)
				switch {
				case ended:
					if err == nil {
						rt.Fatal("a targeted frame reached an ended subscription")
					}
				case frames >= int64(maxQ) || (frames > 0 && bytes+c > maxB):
					if !errors.Is(err, eventbus.ErrQueueFull) {
						rt.Fatalf("targeted with %d frames / %d bytes live (+%d): %v, want ErrQueueFull", frames, bytes, c, err)
					}
				default:
					if err != nil {
						rt.Fatalf("targeted with %d frames / %d bytes live (+%d): %v", frames, bytes, c, err)
					}
					q = append(q, &limItem{kind: 't', typ: typ, cost: c})
					frames, bytes = frames+1, bytes+c
				}
			default: // the consumer reads a few
				read(rapid.IntRange(1, 6).Draw(rt, "read"))
			}
		}
		read(1 << 20)
		if ended && !errors.Is(sub.Err(), eventbus.ErrEvicted) {
			rt.Fatalf("ended with %v, want ErrEvicted", sub.Err())
		}
	})
}
