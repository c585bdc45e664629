package eventbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// AgentPool parity: every scenario in which the bus is held to AgentPool's
// EventBus is in this file (its coalescing: coalesce/agentpool_test.go), in
// three parts — TestAgentPoolTwins, AgentPool's own tests as Go twins;
// TestInput1…TestInput6, the inputs of the AgentPool porting issue; and,
// at the end of the file, the ends of a subscription and the edges of a
// session's life where a porter meets a choice (TestUnsubscribeClosesQueue,
// TestSubscribeAfterCloseSession, TestCoalesceLeavesIDZeroEventsUnmerged).
//
// AgentPool's EventBus tests as Go twins: one row per Python test of
// Leoyzen/agentpool's tests/orchestrator/test_event_bus.py ("eb:") and
// tests/test_event_bus_conditional_replay.py ("cr:"), plus one per item of
// the testing strategy of its docs/adr/eventbus-replay.md ("adr:"). Each row
// is named after the test it mirrors and checks what the Python test checks,
// with AgentPool's expected values — except where a row's differs says we
// deliberately differ; docs/python-parity.md has the same line. The
// coalescing tests of those files are twinned in coalesce/agentpool_test.go.
//
// The Python fixtures map to: EventBus(max_queue_size=N) →
// eventbus.Options{MaxQueueSize: N} (an unset overflow policy is drop_oldest,
// AgentPool's default); a RunStartedEvent(run_id=r) → an event of type
// run_started with data {"run_id": r}; _drain_stream → TryNext until empty;
// queue.shutdown / QueueShutDown → Subscription.Close / a non-nil Next
// error; bus._session_tree[p] = [c] → CreateSession(c, p); inspecting
// bus._replay_buffers[s] → a subscribe that replays it (or Sessions()).
type twin struct {
	python  string // the Python test, prefixed eb:, cr: or adr:
	differs string // "" when the row expects what AgentPool does; else what we do instead, and why
	run     func(t *testing.T)
}

func TestAgentPoolTwins(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, r := range agentPoolTwins {
		require.False(t, seen[r.python], "one row per Python test: %s twice", r.python)
		seen[r.python] = true
		t.Run(r.python, func(t *testing.T) {
			t.Parallel()
			if r.differs != "" {
				t.Logf("deliberately differs from AgentPool: %s", r.differs)
			}
			r.run(t)
		})
	}
}

// pyBus is EventBus(max_queue_size=q, replay_buffer_size=ring) with
// AgentPool's default policy (unset: drop_oldest); ring 0 means 100.
func pyBus(t *testing.T, q, ring int) *eventbus.Bus {
	return newBus(t, eventbus.Options{MaxQueueSize: q, ReplayBufferSize: ring, DisableSlowClientWarning: true})
}

// run publishes RunStartedEvent(session_id=s, run_id=id).
func run(t *testing.T, b *eventbus.Bus, s, id string) eventbus.Event {
	t.Helper()
	ev, err := b.Publish(s, "run_started", map[string]string{"session_id": s, "run_id": id})
	require.NoError(t, err)
	return ev
}

// runIDs returns the run_id of every run_started event among evs, in order
// (what the Python tests collect with isinstance(e.event, RunStartedEvent)).
func runIDs(t *testing.T, evs []eventbus.Event) []string {
	t.Helper()
	out := []string{}
	for _, e := range evs {
		if e.Type != "run_started" {
			continue
		}
		var d struct {
			RunID string `json:"run_id"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &d))
		out = append(out, d.RunID)
	}
	return out
}

func runs(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// drainEnd reads every frame queued and, when the subscription has ended,
// its reason (the Python _drain_queue reads until QueueShutDown).
func drainEnd(t *testing.T, s *eventbus.Subscription) ([]eventbus.Event, error) {
	t.Helper()
	evs := drain(s)
	select {
	case <-s.Done():
		more, err := readToEnd(t, s)
		return append(evs, more...), err
	default:
		return evs, nil
	}
}

var agentPoolTwins = []twin{
	// --- tests/orchestrator/test_event_bus.py: subscribe / unsubscribe ---
	{python: "eb:test_subscribe_creates_receive_stream", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		_, ok := s.TryNext() // the queue's get_nowait
		assert.False(t, ok)
		assert.NoError(t, s.Err())
	}},
	{python: "eb:test_subscribe_multiple_streams_same_session", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s1 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s2 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		assert.Equal(t, 2, testkit.SubscriberCounts(b)["sess-1"])
		assert.NotSame(t, s1, s2)
	}},
	{python: "eb:test_unsubscribe_removes_stream", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s1 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s2 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s1.Close()
		assert.Equal(t, 1, testkit.SubscriberCounts(b)["sess-1"])
		s2.Close()
		assert.NotContains(t, testkit.SubscriberCounts(b), "sess-1")
	}},
	{python: "eb:test_unsubscribe_unknown_session_noop", run: func(t *testing.T) {
		// Go has no unsubscribe(session, queue) to call with a stranger's
		// queue: the nearest is closing a subscription that is already
		// gone, which is a no-op.
		b := pyBus(t, 3, 0)
		s := subscribe(t, b, "missing", eventbus.SubscribeOptions{})
		s.Close()
		s.Close()
		assert.Empty(t, testkit.SubscriberCounts(b))
	}},
	{python: "eb:test_unsubscribe_wrong_stream_noop", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		fake := subscribe(t, pyBus(t, 10, 0), "sess-1", eventbus.SubscribeOptions{}) // never subscribed here
		fake.Close()
		assert.Equal(t, 1, testkit.SubscriberCounts(b)["sess-1"])
	}},

	// --- publish ---
	{python: "eb:test_publish_single_subscriber", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		run(t, b, "sess-1", "run-1")
		assert.Equal(t, []string{"run-1"}, runIDs(t, []eventbus.Event{next(t, s)}))
	}},
	{python: "eb:test_publish_multiple_subscribers", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s1 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s2 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		run(t, b, "sess-1", "run-1")
		ev1, ev2 := next(t, s1), next(t, s2)
		assert.Equal(t, ev1, ev2)
		assert.Equal(t, []string{"run-1"}, runIDs(t, []eventbus.Event{ev1}))
	}},
	{python: "eb:test_publish_no_subscribers_is_noop", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		run(t, b, "sess-1", "run-1")
		assert.Empty(t, testkit.SubscriberCounts(b))
	}},
	{python: "eb:test_publish_different_sessions_isolated", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		s1 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s2 := subscribe(t, b, "sess-2", eventbus.SubscribeOptions{})
		run(t, b, "sess-1", "run-1")
		assert.Len(t, drain(s1), 1)
		assert.Empty(t, drain(s2))
	}},

	// --- bounded stream dropping ---
	{python: "eb:test_publish_drops_subscriber_when_buffer_full",
		differs: "the evicted subscriber's last frame is client_evicted (naming the first event it did not get) and Next then returns ErrEvicted; AgentPool shuts the queue down without a word",
		run: func(t *testing.T) {
			b := newBus(t, eventbus.Options{MaxQueueSize: 3, OverflowPolicy: eventbus.DropSubscriber, DisableSlowClientWarning: true})
			s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
			for i := 0; i < 5; i++ {
				run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
			}
			evs, err := drainEnd(t, s)
			assert.LessOrEqual(t, len(runIDs(t, evs)), 3)
			assert.NotContains(t, testkit.SubscriberCounts(b), "sess-1")
			assert.ErrorIs(t, err, eventbus.ErrEvicted)
			assert.Equal(t, frame.TypeClientEvicted, evs[len(evs)-1].Type)
		}},
	{python: "eb:test_publish_removes_dead_subscriber_on_broken_resource", run: func(t *testing.T) {
		// AgentPool notices a shut-down queue at the next publish; a closed
		// Subscription is unregistered at once, so the end state is the same.
		b := pyBus(t, 3, 0)
		s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		s.Close()
		run(t, b, "sess-1", "run-1")
		assert.NotContains(t, testkit.SubscriberCounts(b), "sess-1")
	}},

	// --- close_session ---
	{python: "eb:test_close_session_signals_end_of_stream",
		differs: "close_session publishes session_closed, a real event with an id, which both subscribers read before Next returns ErrSessionClosed; AgentPool's consumers only meet QueueShutDown",
		run: func(t *testing.T) {
			b := pyBus(t, 3, 0)
			s1 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
			s2 := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
			run(t, b, "sess-1", "run-1")
			require.NoError(t, b.CloseSession("sess-1"))
			for _, s := range []*eventbus.Subscription{s1, s2} {
				evs, err := readToEnd(t, s)
				assert.GreaterOrEqual(t, len(evs), 1)
				assert.Equal(t, []string{"run-1"}, runIDs(t, evs))
				assert.Equal(t, frame.TypeSessionClosed, evs[len(evs)-1].Type)
				assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
			}
		}},
	{python: "eb:test_close_session_removes_all_subscribers", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		require.NoError(t, b.CloseSession("sess-1"))
		assert.NotContains(t, testkit.SubscriberCounts(b), "sess-1")
	}},
	{python: "eb:test_close_session_unknown_session_noop", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		require.NoError(t, b.CloseSession("missing"))
		assert.Empty(t, testkit.SubscriberCounts(b))
		assert.Zero(t, b.LastEventID())
	}},

	// --- get_subscriber_counts ---
	{python: "eb:test_get_subscriber_counts_returns_snapshot", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		subscribe(t, b, "sess-a", eventbus.SubscribeOptions{})
		subscribe(t, b, "sess-a", eventbus.SubscribeOptions{})
		subscribe(t, b, "sess-b", eventbus.SubscribeOptions{})
		counts := testkit.SubscriberCounts(b)
		assert.Equal(t, map[string]int{"sess-a": 2, "sess-b": 1}, counts)
		subscribe(t, b, "sess-c", eventbus.SubscribeOptions{})
		assert.Len(t, counts, 2, "a snapshot: later subscribes do not change it")
	}},

	// --- replay buffer ---
	{python: "eb:test_replay_buffer_bounds", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		for i := 0; i < 150; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		assert.Equal(t, 100, b.Sessions()[0].Buffered)
		got := runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})))
		require.Len(t, got, 100, "the replay is not cut by max_queue_size=3 here: replay never counts against the live queue")
		assert.Equal(t, "ev50", got[0])
		assert.Equal(t, "ev149", got[99])
	}},
	{python: "eb:test_replay_buffer_cleared_on_session_close", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		run(t, b, "sess-1", "ev1")
		require.Len(t, b.Sessions(), 1)
		require.NoError(t, b.CloseSession("sess-1"))
		assert.Empty(t, b.Sessions())
		assert.Zero(t, b.Stats().Retained, "a root's buffer is not kept")
	}},
	{python: "eb:test_replay_buffer_events_in_order", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		assert.Equal(t, runs("ev", 0, 5), runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))))
	}},
	{python: "eb:test_replay_buffer_per_session_isolated", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		run(t, b, "sess-1", "a")
		run(t, b, "sess-2", "b")
		assert.Equal(t, []string{"a"}, runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))))
		assert.Equal(t, []string{"b"}, runIDs(t, drain(subscribe(t, b, "sess-2", eventbus.SubscribeOptions{}))))
	}},
	{python: "eb:test_replay_buffer_custom_size", run: func(t *testing.T) {
		b := pyBus(t, 3, 10)
		for i := 0; i < 15; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		assert.Equal(t, runs("ev", 5, 15), runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))))
	}},

	// --- replay protocol ---
	{python: "eb:test_replay_protocol_new_subscriber_gets_historical", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		evs := drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))
		assert.Len(t, evs, 5)
		assert.Equal(t, runs("ev", 0, 5), runIDs(t, evs))
	}},
	{python: "eb:test_replay_protocol_ordering", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 3; i++ {
			run(t, b, "sess-1", fmt.Sprintf("hist-%d", i))
		}
		s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		for i := 0; i < 2; i++ {
			run(t, b, "sess-1", fmt.Sprintf("live-%d", i))
		}
		assert.Equal(t, []string{"hist-0", "hist-1", "hist-2", "live-0", "live-1"}, runIDs(t, drain(s)))
	}},
	{python: "eb:test_replay_protocol_no_duplicates", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		got := runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})))
		assert.Equal(t, runs("ev", 0, 5), got)
	}},
	{python: "eb:test_replay_protocol_race_condition", run: func(t *testing.T) {
		// Real threads instead of asyncio tasks: the subscribe races three
		// publishes.
		b := pyBus(t, 10, 0)
		for i := 0; i < 3; i++ {
			run(t, b, "sess-1", fmt.Sprintf("hist-%d", i))
		}
		var wg sync.WaitGroup
		var s *eventbus.Subscription
		wg.Add(4)
		go func() {
			defer wg.Done()
			var err error
			s, err = b.Subscribe(context.Background(), "sess-1", eventbus.SubscribeOptions{})
			assert.NoError(t, err)
		}()
		for i := 0; i < 3; i++ {
			go func() {
				defer wg.Done()
				_, err := b.Publish("sess-1", "run_started", map[string]string{"run_id": fmt.Sprintf("race-%d", i)})
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		require.NotNil(t, s)
		t.Cleanup(s.Close)
		for i := 0; i < 2; i++ {
			run(t, b, "sess-1", fmt.Sprintf("live-%d", i))
		}
		got := runIDs(t, drain(s))
		assert.Len(t, got, 8)
		assert.ElementsMatch(t, got, uniq(got), "no duplicates")
		assert.Equal(t, []string{"hist-0", "hist-1", "hist-2"}, got[:3])
		assert.Equal(t, []string{"live-0", "live-1"}, got[6:])
	}},

	// --- SSE event ordering ---
	{python: "eb:test_event_ordering_replay_then_live", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		part := func(typ string, index int) {
			_, err := b.Publish("sess-1", typ, map[string]int{"index": index})
			require.NoError(t, err)
		}
		part("part_start", 0)
		part("part_delta", 0)
		part("part_end", 0)
		s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
		part("part_start", 1)
		part("part_delta", 1)
		part("part_end", 1)
		evs := drain(s)
		require.Len(t, evs, 6)
		var got []string
		for _, e := range evs {
			got = append(got, e.Type+":"+string(e.Data))
		}
		assert.Equal(t, []string{`part_start:{"index":0}`, `part_delta:{"index":0}`, `part_end:{"index":0}`,
			`part_start:{"index":1}`, `part_delta:{"index":1}`, `part_end:{"index":1}`}, got)
	}},
	{python: "eb:test_event_ordering_no_gaps_in_replay", run: func(t *testing.T) {
		b := pyBus(t, 200, 100)
		for i := 0; i < 150; i++ {
			run(t, b, "sess-1", fmt.Sprintf("ev%d", i))
		}
		evs := drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))
		// Differs (issue 27.10): the replay ends with replay_complete
		// saying that older events are gone; AgentPool says nothing. No
		// resync frame: a subscribe without a cursor had no position.
		require.Len(t, evs, 101)
		assert.Equal(t, runs("ev", 50, 150), runIDs(t, evs[:100]))
		assert.Equal(t, frame.ReplayCompleteData{LastReplayedEventID: evs[99].ID, ReplayedCount: 100,
			FirstReplayedEventID: evs[0].ID, HistoryLost: true}, decode[frame.ReplayCompleteData](t, evs[100]))
	}},
	{python: "eb:test_event_ordering_concurrent_publish", run: func(t *testing.T) {
		b := pyBus(t, 200, 100)
		var wg sync.WaitGroup
		for tid := 0; tid < 5; tid++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					_, err := b.Publish("sess-1", "run_started", map[string]string{"run_id": fmt.Sprintf("task%d-ev%d", tid, i)})
					assert.NoError(t, err)
				}
			}()
		}
		wg.Wait()
		got := runIDs(t, drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})))
		require.Len(t, got, 100)
		assert.ElementsMatch(t, got, uniq(got))
		for tid := 0; tid < 5; tid++ {
			var mine []string
			for _, r := range got {
				if strings.HasPrefix(r, fmt.Sprintf("task%d-", tid)) {
					mine = append(mine, r)
				}
			}
			assert.Equal(t, runs(fmt.Sprintf("task%d-ev", tid), 0, 20), mine)
		}
	}},
	{python: "eb:test_event_ordering_mixed_sessions", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			for _, s := range []string{"sess-1", "sess-2", "sess-3"} {
				run(t, b, s, fmt.Sprintf("s%s-ev%d", s[len(s)-1:], i))
			}
		}
		evs := drain(subscribe(t, b, "sess-1", eventbus.SubscribeOptions{}))
		assert.Len(t, evs, 5)
		assert.Equal(t, runs("s1-ev", 0, 5), runIDs(t, evs))
		for _, e := range evs {
			assert.Equal(t, "sess-1", e.Session)
		}
	}},

	// --- descendants scope ---
	{python: "eb:test_child_events_visible_with_descendants_scope", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		require.NoError(t, b.CreateSession("parent", ""))
		require.NoError(t, b.CreateSession("child", "parent"))
		s := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants})
		run(t, b, "child", "run-child")
		assert.Equal(t, []string{"run-child"}, runIDs(t, []eventbus.Event{next(t, s)}))
	}},
	{python: "eb:test_child_events_not_visible_with_session_scope", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		require.NoError(t, b.CreateSession("parent", ""))
		require.NoError(t, b.CreateSession("child", "parent"))
		s := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Session})
		run(t, b, "child", "run-child")
		assert.Empty(t, drain(s))
	}},
	{python: "eb:test_event_ordering_parent_and_child", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		require.NoError(t, b.CreateSession("parent", ""))
		require.NoError(t, b.CreateSession("child", "parent"))
		s := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants})
		for i, sess := range []string{"parent", "child", "parent", "child", "parent"} {
			run(t, b, sess, fmt.Sprintf("run-%d", i+1))
		}
		assert.Equal(t, runs("run-", 1, 6), runIDs(t, readN(t, s, 5)))
	}},
	{python: "eb:test_grandchild_events_visible_with_descendants_scope", run: func(t *testing.T) {
		b := pyBus(t, 3, 0)
		require.NoError(t, b.CreateSession("parent", ""))
		require.NoError(t, b.CreateSession("child", "parent"))
		require.NoError(t, b.CreateSession("grandchild", "child"))
		s := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants})
		run(t, b, "grandchild", "run-grandchild")
		assert.Equal(t, []string{"run-grandchild"}, runIDs(t, []eventbus.Event{next(t, s)}))
	}},

	// --- close_session races ---
	{python: "eb:test_concurrent_publish_and_close_session_no_deadlock",
		differs: "a publish after the close fails with ErrSessionClosed instead of silently re-creating the buffer (CreateSession reopens the id on purpose)",
		run: func(t *testing.T) {
			b := pyBus(t, 100, 0)
			subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
			done := make(chan struct{})
			var refused int
			go func() {
				defer close(done)
				for i := 0; i < 10; i++ {
					if _, err := b.Publish("sess-1", "part_delta", map[string]string{"text": fmt.Sprintf("chunk%d", i)}); err != nil {
						assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
						refused++
					}
				}
			}()
			require.NoError(t, b.CloseSession("sess-1"))
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("publish and close_session deadlocked")
			}
			assert.False(t, b.SessionExists("sess-1"), "no publish re-created it")
		}},

	// --- backpressure (asyncio.Queue-based subscribers) ---
	{python: "eb:test_backpressure_no_deadlock_with_slow_consumer",
		differs: "the dropped events are announced (state_resync_required{events_dropped} where they were) and the stream ends with session_closed; AgentPool drops silently",
		run: func(t *testing.T) {
			b := pyBus(t, 5, 0)
			s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
			for i := 0; i < 50; i++ {
				run(t, b, "sess-bp", fmt.Sprintf("ev-%d", i))
			}
			require.NoError(t, b.CloseSession("sess-bp"))
			evs, err := readToEnd(t, s)
			got := runIDs(t, evs)
			assert.NotEmpty(t, got)
			assert.LessOrEqual(t, len(got), 50)
			assert.Equal(t, runs("ev-", 45, 50), got, "drop_oldest keeps the newest")
			assert.Equal(t, 1, count(evs, frame.TypeStateResyncRequired))
			assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
		}},
	{python: "eb:test_backpressure_retains_subscriber_with_drop_oldest", run: func(t *testing.T) {
		b := pyBus(t, 5, 0)
		subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
		for i := 0; i < 5; i++ {
			run(t, b, "sess-bp", fmt.Sprintf("ev-%d", i))
		}
		run(t, b, "sess-bp", "overflow-1")
		run(t, b, "sess-bp", "overflow-2")
		assert.Contains(t, testkit.SubscriberCounts(b), "sess-bp", "drop_oldest, the default, keeps the subscriber")
	}},
	{python: "eb:test_subscribe_returns_asyncio_queue", run: func(t *testing.T) {
		// get / get_nowait / shutdown are Next / TryNext / Close.
		b := pyBus(t, 5, 0)
		s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
		_, ok := s.TryNext()
		assert.False(t, ok)
		s.Close()
		_, err := s.Next(context.Background())
		assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)
	}},
	{python: "eb:test_unsubscribe_closes_queue", run: func(t *testing.T) {
		b := pyBus(t, 5, 0)
		s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
		run(t, b, "sess-bp", "ev-1")
		s.Close()
		evs, err := readToEnd(t, s)
		assert.LessOrEqual(t, len(evs), 1, "Close discards what was queued: 0 here")
		assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)
	}},
	{python: "eb:test_close_session_signals_queue_shutdown", run: func(t *testing.T) {
		b := pyBus(t, 5, 0)
		s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
		run(t, b, "sess-bp", "ev-1")
		require.NoError(t, b.CloseSession("sess-bp"))
		_, err := readToEnd(t, s)
		assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
		assert.NotContains(t, testkit.SubscriberCounts(b), "sess-bp")
	}},
	{python: "eb:test_parallel_publishers_no_deadlock",
		differs: "drops under the 5-frame queue are announced with events_dropped frames, and the stream ends with session_closed",
		run: func(t *testing.T) {
			b := pyBus(t, 5, 0)
			s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
			var wg sync.WaitGroup
			for _, prefix := range []string{"a", "b", "c"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						_, err := b.Publish("sess-bp", "run_started", map[string]string{"run_id": fmt.Sprintf("%s-%d", prefix, i)})
						assert.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			require.NoError(t, b.CloseSession("sess-bp"))
			evs, err := readToEnd(t, s)
			got := runIDs(t, evs)
			assert.NotEmpty(t, got)
			assert.LessOrEqual(t, len(got), 60)
			assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
		}},
	{python: "eb:test_replay_buffer_with_queue", run: func(t *testing.T) {
		b := pyBus(t, 5, 0)
		run(t, b, "sess-bp", "hist-1")
		run(t, b, "sess-bp", "hist-2")
		got := runIDs(t, drain(subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})))
		assert.Contains(t, got, "hist-1")
		assert.Contains(t, got, "hist-2")
	}},

	// --- tests/test_event_bus_conditional_replay.py ---
	{python: "cr:test_event_id_assigned_at_publish_time", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		var got []uint64
		for i := 0; i < 3; i++ {
			got = append(got, run(t, b, "s1", fmt.Sprintf("run-%d", i)).ID)
		}
		assert.Equal(t, []uint64{1, 2, 3}, got)
	}},
	{python: "cr:test_replayed_events_preserve_original_event_id", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 3; i++ {
			run(t, b, "s1", fmt.Sprintf("run-%d", i))
		}
		evs := drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{}))
		assert.Equal(t, []uint64{1, 2, 3}, ids(evs))
		for _, e := range evs {
			assert.True(t, e.Replay, "is_replay")
		}
	}},
	{python: "cr:test_subscribe_replay_false_delivers_zero_historical", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "s1", fmt.Sprintf("hist-%d", i))
		}
		s := subscribe(t, b, "s1", eventbus.SubscribeOptions{NoReplay: true})
		assert.Empty(t, drain(s))
		run(t, b, "s1", "live-0")
		assert.Equal(t, []string{"live-0"}, runIDs(t, drain(s)))
	}},
	{python: "cr:test_subscribe_with_last_event_id_filters_replay",
		differs: "a subscribe with a cursor ends its replay with a replay_complete frame (no id), so a client knows history is over",
		run: func(t *testing.T) {
			b := pyBus(t, 10, 0)
			for i := 0; i < 5; i++ {
				run(t, b, "s1", fmt.Sprintf("ev-%d", i))
			}
			evs := drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(3)}))
			assert.Equal(t, []uint64{4, 5}, ids(evs))
			assert.Equal(t, []string{"ev-3", "ev-4"}, runIDs(t, evs))
			assert.Equal(t, []string{"4r:run_started", "5r:run_started", "replay_complete"}, describe(evs))
		}},
	{python: "cr:test_subscribe_with_none_last_event_id_replays_all", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "s1", fmt.Sprintf("ev-%d", i))
		}
		evs := drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{Cursor: nil}))
		assert.Len(t, evs, 5)
		assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids(evs))
	}},
	{python: "cr:test_gap_detection_falls_back_to_full_replay",
		differs: "the full replay is preceded by state_resync_required{ring_evicted} naming the gap (lastDeliveredId 1, completeFromId 3) and ends with replay_complete; AgentPool's fallback is silent",
		run: func(t *testing.T) {
			b := pyBus(t, 10, 3)
			for i := 0; i < 5; i++ {
				run(t, b, "s1", fmt.Sprintf("ev-%d", i))
			}
			evs := drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(1)}))
			assert.Equal(t, []uint64{3, 4, 5}, ids(evs))
			require.Equal(t, "state_resync_required:ring_evicted", describe(evs)[0])
			d := decode[frame.ResyncData](t, evs[0])
			assert.Equal(t, uint64(1), d.LastDeliveredID)
			assert.Equal(t, uint64(3), d.CompleteFromID)
		}},
	{python: "cr:test_conditional_replay_is_non_destructive", run: func(t *testing.T) {
		b := pyBus(t, 10, 0)
		for i := 0; i < 5; i++ {
			run(t, b, "s1", fmt.Sprintf("ev-%d", i))
		}
		assert.Empty(t, drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{NoReplay: true})))
		assert.Equal(t, 5, b.Sessions()[0].Buffered)
		assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids(drain(subscribe(t, b, "s1", eventbus.SubscribeOptions{}))))
	}},
	{python: "cr:test_scope_all_with_last_event_id_filters_across_sessions",
		differs: "ends with replay_complete (a cursor was given); and the all-scope replay is merged by id across sessions, where AgentPool concatenates buffers in dict order",
		run: func(t *testing.T) {
			b := pyBus(t, 10, 0)
			run(t, b, "s1", "s1-ev0")
			run(t, b, "s1", "s1-ev1")
			run(t, b, "s2", "s2-ev0")
			run(t, b, "s2", "s2-ev1")
			evs := drain(subscribe(t, b, "__global_sse__", eventbus.SubscribeOptions{Scope: scope.All, Cursor: eventbus.At(2)}))
			assert.Equal(t, []uint64{3, 4}, ids(evs))
			for _, e := range evs[:2] {
				assert.Equal(t, "s2", e.Session)
			}
			assert.Equal(t, frame.TypeReplayComplete, evs[2].Type)
		}},

	// --- docs/adr/eventbus-replay.md, "Testing Strategy" ---
	{python: "adr:1_buffer_bounds", run: func(t *testing.T) {
		b := pyBus(t, 0, 100)
		for i := 0; i < 150; i++ {
			run(t, b, "s", fmt.Sprintf("ev%d", i))
		}
		assert.Equal(t, runs("ev", 50, 150), runIDs(t, drain(subscribe(t, b, "s", eventbus.SubscribeOptions{}))))
	}},
	{python: "adr:2_replay_ordering", run: func(t *testing.T) {
		b := pyBus(t, 0, 0)
		for i := 0; i < 10; i++ {
			run(t, b, "s", fmt.Sprintf("ev%d", i))
		}
		evs := drain(subscribe(t, b, "s", eventbus.SubscribeOptions{}))
		assert.Equal(t, runs("ev", 0, 10), runIDs(t, evs), "oldest to newest")
		assert.IsIncreasing(t, ids(evs))
	}},
	{python: "adr:3_concurrent_access", run: func(t *testing.T) {
		// Subscribers join while events are published: each sees a
		// contiguous, ordered, duplicate-free tail ending at the last event.
		b := newBus(t, eventbus.Options{ReplayBufferSize: 1000, MaxQueueSize: 1000})
		const total = 500
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < total; i++ {
				_, err := b.Publish("s", "run_started", map[string]int{"n": i})
				assert.NoError(t, err)
			}
		}()
		var subs []*eventbus.Subscription
		for i := 0; i < 8; i++ {
			subs = append(subs, subscribe(t, b, "s", eventbus.SubscribeOptions{}))
			// The next one joins further into the stream (or after its end).
			joined := b.LastEventID()
			require.Eventually(t, func() bool {
				select {
				case <-done:
					return true
				default:
					return b.LastEventID() > joined
				}
			}, waitFor, 10*time.Microsecond)
		}
		<-done
		for _, s := range subs {
			got := ids(drain(s))
			require.NotEmpty(t, got)
			assert.Equal(t, seq(got[0], total), got, "contiguous from its first event to the last")
		}
	}},
	{python: "adr:4_memory_cleanup", run: func(t *testing.T) {
		b := pyBus(t, 0, 0)
		run(t, b, "s", "ev0")
		require.NoError(t, b.CloseSession("s"))
		assert.Empty(t, b.Sessions())
		assert.Zero(t, b.Stats().Sessions)
		assert.Zero(t, b.Stats().Retained)
	}},
	{python: "adr:5_scope_behavior",
		differs: "a descendants subscriber also gets the children's history replayed, merged by id with the parent's; AgentPool replays only the subscribed session's own buffer and children arrive live only",
		run: func(t *testing.T) {
			b := pyBus(t, 0, 0)
			require.NoError(t, b.CreateSession("parent", ""))
			require.NoError(t, b.CreateSession("child", "parent"))
			run(t, b, "parent", "p0")
			run(t, b, "child", "c0")
			s := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants})
			run(t, b, "child", "c1")
			assert.Equal(t, []string{"p0", "c0", "c1"}, runIDs(t, drain(s)))
		}},
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// The seven inputs of the AgentPool porting issue, one named test each (the
// example server's input 7 is TestInput7TypoCreatesNoSession in
// examples/agentserver/server, with its input 1 over HTTP).

// Input 1: CreateSession on a closed id reopens it under the same sequence;
// a resume with a cursor from before the close is told what it lost; a late
// publish to a closed id that was not reopened stays refused.
func TestInput1ReopenClosedSession(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	before := publish(t, b, "s", 3)
	require.NoError(t, b.CloseSession("s"))
	closedID := b.LastEventID()

	_, err := b.Publish("s", "msg", nil)
	require.ErrorIs(t, err, eventbus.ErrSessionClosed, "a late publish to a closed id stays refused")
	_, err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.True(t, b.SessionClosed("s"))

	require.NoError(t, b.CreateSession("s", ""), "ACP session/resume: same id")
	assert.False(t, b.SessionClosed("s"))
	assert.True(t, b.SessionExists("s"))
	after := publish(t, b, "s", 2)
	assert.Equal(t, closedID+1, after[0], "the same bus sequence goes on")

	// A client that had everything up to before[1] comes back: it is told
	// that before[2] and session_closed are gone, then gets the new events.
	old := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(before[1])})
	evs := drain(old)
	require.Equal(t, []string{"state_resync_required:ring_evicted", strconv.FormatUint(after[0], 10) + "r",
		strconv.FormatUint(after[1], 10) + "r", "replay_complete"}, describe(evs))
	rs := decode[frame.ResyncData](t, evs[0])
	assert.Equal(t, before[1], rs.LastDeliveredID)
	assert.Equal(t, after[0], rs.CompleteFromID)

	// One that saw session_closed lost nothing: no frame.
	seen := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(closedID)})
	assert.Equal(t, 0, count(drain(seen), frame.TypeStateResyncRequired))

	// Reopening an open id is the usual no-op; the parent must be open.
	require.NoError(t, b.CreateSession("s", ""))
	require.NoError(t, b.CreateSession("p", ""))
	require.NoError(t, b.CloseSession("p"))
	require.ErrorIs(t, b.CreateSession("c", "p"), eventbus.ErrSessionClosed)
}

// Input 2: closing a middle session keeps the tree connected; and
// CloseSessionTree closes every descendant, however deep.
func TestInput2CloseMiddleKeepsTreeConnected(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("g", ""))
	require.NoError(t, b.CreateSession("p", "g"))
	require.NoError(t, b.CreateSession("c", "p"))
	sub := subscribe(t, b, "g", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	require.NoError(t, b.CloseSession("p"))
	closed := b.LastEventID()
	ev, err := b.Publish("c", "msg", nil)
	require.NoError(t, err)
	assert.Equal(t, []uint64{closed, ev.ID}, ids(drain(sub)), "g's descendants subscriber keeps hearing c")
	assert.Equal(t, "g", parentOf(b, "c"), "c moved up to g")
}

func TestInput2CloseSessionTreeAnyDepth(t *testing.T) {
	t.Parallel()
	const depth = 5000 // deeper than any recursion would like
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("n0", ""))
	for i := 1; i < depth; i++ {
		require.NoError(t, b.CreateSession("n"+strconv.Itoa(i), "n"+strconv.Itoa(i-1)))
	}
	require.NoError(t, b.CreateSession("side", "n2"))
	all := subscribe(t, b, "n0", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
	require.NoError(t, b.CloseSessionTree("n0"))
	assert.Empty(t, b.Sessions())
	var order []string
	for _, ev := range drain(all) {
		order = append(order, ev.Session)
	}
	require.Len(t, order, depth+1, "one session_closed per session")
	assert.Equal(t, "n"+strconv.Itoa(depth-1), order[0], "the deepest first")
	assert.Equal(t, "n0", order[depth], "the root last")
	assert.Less(t, indexOf(order, "side"), indexOf(order, "n2"), "a child before its parent")
	require.NoError(t, b.CloseSessionTree("n0"), "idempotent")
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Input 3: a closed sub-agent's history stays resumable while its tree
// lives. Root with two children (ring 1000); a descendants client reads 46
// of 54 events, goes away for 200 ms, the children finish and are closed;
// its resume with Last-Event-ID loses nothing (before: ring_evicted, 8 of
// 54 gone). The buffers go after ClosedRetention (the resume is then told),
// or when the root closes.
func TestInput3ClosedChildHistoryResumable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
		require.NoError(t, b.CreateSession("root", ""))
		require.NoError(t, b.CreateSession("a", "root"))
		require.NoError(t, b.CreateSession("b", "root"))
		c := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants})
		var all []uint64
		for i := 0; i < 18; i++ {
			for _, s := range []string{"root", "a", "b"} {
				all = append(all, publish(t, b, s, 1)...)
			}
		}
		got := ids(readN(t, c, 46))
		require.Equal(t, all[:46], got)
		c.Close() // the client goes away
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, b.CloseSession("a"))
		require.NoError(t, b.CloseSession("b"))
		closedA, closedB := b.LastEventID()-1, b.LastEventID()
		assert.Equal(t, 2, b.Stats().Retained)

		r := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(got[45])})
		evs := drain(r)
		assert.Equal(t, append(append([]uint64{}, all[46:]...), closedA, closedB), ids(evs), "nothing lost")
		assert.Zero(t, count(evs, frame.TypeStateResyncRequired))
		allScope := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.All, Cursor: eventbus.At(got[45])})
		assert.Zero(t, count(drain(allScope), frame.TypeStateResyncRequired), "the all scope reads them too")

		// After ClosedRetention (10 min) the buffers go; a resume is told.
		time.Sleep(eventbus.Options{}.WithDefaults().ClosedRetention + time.Minute)
		synctest.Wait()
		st := b.Stats()
		assert.Zero(t, st.Retained)
		assert.Equal(t, uint64(2), st.RetainedDropped)
		late := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(got[45])})
		evs = drain(late)
		require.NotEmpty(t, evs)
		assert.Equal(t, "state_resync_required:ring_evicted", describe(evs)[0])
	})
}

// Input 4: a root that already published can be attached to a parent at
// any time; its events then reach the new ancestors, a descendants resume
// replays its history merged by id, and cycles are still refused.
func TestInput4AttachLate(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("p", ""))
	c1 := publish(t, b, "c", 2) // the sub-agent starts before its link is known
	p1 := publish(t, b, "p", 1)
	live := subscribe(t, b, "p", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	require.NoError(t, b.CreateSession("c", "p"), "attach late")
	c2 := publish(t, b, "c", 1)
	assert.Equal(t, c2, ids(drain(live)), "c's events now fan out to p's descendants subscribers")

	fresh := subscribe(t, b, "p", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: eventbus.At(0)})
	want := []uint64{c1[0], c1[1], p1[0], c2[0]}
	evs := drain(fresh)
	assert.Equal(t, want, ids(evs[:len(evs)-1]), "history merged by id")
	assert.Equal(t, frame.TypeReplayComplete, evs[len(evs)-1].Type)

	require.ErrorIs(t, b.CreateSession("p", "c"), scope.ErrCycle, "cycles are still refused")
	require.NoError(t, b.CreateSession("q", ""))
	require.ErrorIs(t, b.CreateSession("q", "q"), scope.ErrCycle)
	require.ErrorIs(t, b.CreateSession("c", "q"), eventbus.ErrInvalid, "a session is attached once, not moved")
}

// Input 4's seam: the session controller is asked for a session's parent
// the first time the bus sees the id, and unknown parents are created the
// same way.
func TestInput4SessionController(t *testing.T) {
	t.Parallel()
	var asked []string
	parents := map[string]string{"tool": "sub", "sub": "main", "loop1": "loop2", "loop2": "loop1"}
	b := newBus(t, eventbus.Options{SessionController: func(id string) string {
		asked = append(asked, id)
		return parents[id]
	}})
	root := subscribe(t, b, "main", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	ev, err := b.Publish("tool", "msg", nil)
	require.NoError(t, err)
	assert.Equal(t, []uint64{ev.ID}, ids(drain(root)), "placed in the tree from its first event")
	assert.Equal(t, "sub", parentOf(b, "tool"))
	assert.Equal(t, "main", parentOf(b, "sub"))
	assert.Equal(t, []string{"main", "tool", "sub"}, asked, "asked once per id, the first time it is seen")
	publish(t, b, "tool", 1)
	assert.Len(t, asked, 3, "not asked again")

	// A controller that answers with a cycle does not loop: the session
	// that would close it becomes a root.
	publish(t, b, "loop1", 1)
	assert.Equal(t, "loop2", parentOf(b, "loop1"))
	assert.Equal(t, "", parentOf(b, "loop2"))

	// CreateSession names the parent itself; the controller is not asked.
	require.NoError(t, b.CreateSession("explicit", ""))
	assert.NotContains(t, asked, "explicit")
}

// Input 5: CloseSession and ClearReplayBuffer on an unknown id are no-ops;
// NoReplay wins over a cursor.
func TestInput5IdempotentLikeAgentPool(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CloseSession("never"))
	require.NoError(t, b.CloseSessionTree("never"))
	require.NoError(t, b.ClearReplayBuffer("never"))
	assert.False(t, b.SessionExists("never"))
	assert.Zero(t, b.LastEventID(), "no session_closed for a session that never was")

	publish(t, b, "s", 3)
	require.NoError(t, b.CloseSession("s"))
	require.NoError(t, b.ClearReplayBuffer("s"), "closed: a no-op too")

	publish(t, b, "t", 3)
	s := subscribe(t, b, "t", eventbus.SubscribeOptions{NoReplay: true, Cursor: eventbus.At(1)})
	assert.Empty(t, drain(s), "replay=False with last_event_id replays nothing, and no frame")
	live := publish(t, b, "t", 1)
	assert.Equal(t, live, ids(drain(s)))
}

// Input 6: an unset policy means drop_oldest (announced) for in-process
// subscribers; an explicit one applies as set. (The SSE handler's side of
// the rule is TestHandlerOverflowDefault in adapters/sse.)
func TestInput6OverflowDefault(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxQueueSize: 2, DisableSlowClientWarning: true})
	// Issue 27.8: Options().OverflowPolicy read "" when unset, where a
	// porter expects drop_oldest; it is the policy in force, and
	// OverflowPolicySet says it was not set.
	assert.Equal(t, eventbus.DropOldest, b.Options().OverflowPolicy, "unset: the in-process default in force")
	assert.False(t, b.OverflowPolicySet())
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	ids5 := publish(t, b, "s", 5)
	evs := drain(s)
	assert.NoError(t, s.Err(), "EventBus(max_queue_size=N) ported literally keeps the subscriber")
	require.Equal(t, []string{"state_resync_required:events_dropped", strconv.FormatUint(ids5[3], 10), strconv.FormatUint(ids5[4], 10)}, describe(evs))
	d := decode[frame.ResyncData](t, evs[0])
	assert.Equal(t, 3, d.DroppedCount, "the oldest three were dropped, announced")

	ex := newBus(t, eventbus.Options{MaxQueueSize: 2, OverflowPolicy: eventbus.DropSubscriber})
	assert.Equal(t, eventbus.DropSubscriber, ex.Options().OverflowPolicy)
	assert.True(t, ex.OverflowPolicySet())
	s2 := subscribe(t, ex, "s", eventbus.SubscribeOptions{NoReplay: true})
	publish(t, ex, "s", 5)
	_, err := readToEnd(t, s2)
	assert.ErrorIs(t, err, eventbus.ErrEvicted, "an explicit policy applies as set")
}

// The ends of a subscription and the edges of a session's life where a
// porter from AgentPool meets a choice; docs/python-parity.md lists each.

// AgentPool's test_unsubscribe_closes_queue (tests/orchestrator/
// test_event_bus.py): unsubscribe() shuts the queue down without
// `immediate`, so the consumer still drains what was queued (ev-1) and then
// gets QueueShutDown. Unsubscribe is that draining end; Close (the
// discarding end) is AgentPool's shutdown(immediate=True).
func TestUnsubscribeClosesQueue(t *testing.T) {
	t.Parallel()
	b := pyBus(t, 5, 0)
	s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
	ev := run(t, b, "sess-bp", "ev-1")
	s.Unsubscribe()
	assert.NotContains(t, testkit.SubscriberCounts(b), "sess-bp", "the slot is released at once")
	after := run(t, b, "sess-bp", "ev-2")
	evs, err := readToEnd(t, s)
	assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)
	assert.Equal(t, []uint64{ev.ID}, ids(evs), "what was queued is drained, nothing published after the call")
	assert.NotContains(t, ids(evs), after.ID)
	assert.Equal(t, []string{"ev-1"}, runIDs(t, evs))

	// Idempotent; a Close after it discards what is left; the reason stays.
	s2 := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{NoReplay: true})
	run(t, b, "sess-bp", "ev-3")
	s2.Unsubscribe()
	s2.Unsubscribe()
	s2.Close()
	evs, err = readToEnd(t, s2)
	assert.Empty(t, evs, "Close after Unsubscribe discards")
	assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)

	// The Events channel hands over what was queued, then closes.
	s3 := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{NoReplay: true})
	want := run(t, b, "sess-bp", "ev-4")
	s3.Unsubscribe()
	var got []uint64
	for ev := range s3.Events() {
		got = append(got, ev.ID)
	}
	assert.Equal(t, []uint64{want.ID}, got)
	assert.ErrorIs(t, s3.Err(), eventbus.ErrUnsubscribed)
}

// AgentPool's close_session pops the session's replay buffer
// (test_replay_buffer_cleared_on_session_close), and a later subscribe is
// accepted and replays nothing. Here Subscribe after CloseSession is
// ErrSessionClosed (for the session TTL, unless CreateSession reopens the
// id), as a late Publish is: a subscriber accepted on a closed session
// would wait for events that no publish may bring. Reopened, the session
// replays from its new incarnation on.
func TestSubscribeAfterCloseSession(t *testing.T) {
	t.Parallel()
	b := pyBus(t, 5, 0)
	run(t, b, "sess-1", "ev1")
	require.NoError(t, b.CloseSession("sess-1"))
	_, err := b.Subscribe(context.Background(), "sess-1", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.Contains(t, err.Error(), `"sess-1"`, "the error names the session")
	_, err = b.Subscribe(context.Background(), "sess-1", eventbus.SubscribeOptions{NoReplay: true})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed, "replay=False changes nothing")

	require.NoError(t, b.CreateSession("sess-1", ""))
	s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
	got := drain(s)
	require.Len(t, got, 1, "a reopened root's buffer starts empty: nothing replayed")
	assert.Equal(t, frame.ReplayCompleteData{HistoryLost: true}, decode[frame.ReplayCompleteData](t, got[0]),
		"but the replay says its older history is gone")
	ev := run(t, b, "sess-1", "ev2")
	assert.Equal(t, []uint64{ev.ID}, ids(drain(s)))
}

// AgentPool's _merge_envelopes merges raw events that carry no event id.
// Here ID 0 is the mark of a synthetic frame (Event.Synthetic), so
// Coalesce never merges an id-0 event: it passes through and ends any run.
// Events with ids merge as AgentPool's do.
func TestCoalesceLeavesIDZeroEventsUnmerged(t *testing.T) {
	t.Parallel()
	delta := func(id uint64, text string) eventbus.Event {
		data, err := json.Marshal(map[string]string{"delta": text})
		require.NoError(t, err)
		return eventbus.Event{ID: id, Session: "s", Type: "delta", Data: data}
	}
	c := byType{}
	raw := []eventbus.Event{delta(0, "a"), delta(0, "b"), delta(0, "c")}
	got := eventbus.Coalesce(c, raw)
	assert.Equal(t, raw, got, "id-0 events pass through unmerged and in order")

	withIDs := []eventbus.Event{delta(1, "a"), delta(2, "b"), delta(0, "x"), delta(3, "c"), delta(4, "d")}
	got = eventbus.Coalesce(c, withIDs)
	require.Len(t, got, 3)
	assert.Equal(t, 2, got[0].Count)
	assert.Equal(t, uint64(2), got[0].ID)
	assert.Equal(t, uint64(0), got[1].ID, "the id-0 event ends the run")
	assert.Equal(t, 2, got[2].Count)
	assert.Equal(t, uint64(3), got[2].FirstID)
	sc := eventbus.Event{Session: "s", Type: frame.TypeSlowClientWarning, Data: []byte(`{}`)}
	assert.Equal(t, []eventbus.Event{sc}, eventbus.Coalesce(c, []eventbus.Event{sc}))
}

// byType merges consecutive events of one type by concatenating the
// "delta" strings.
type byType struct{}

func (byType) Key(ev eventbus.Event) (string, bool) { return ev.Type, false }

func (byType) Merge(_ string, evs []eventbus.Event) (json.RawMessage, error) {
	var all string
	for _, ev := range evs {
		var d struct{ Delta string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		all += d.Delta
	}
	return json.Marshal(map[string]string{"delta": all})
}
