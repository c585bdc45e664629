package coalesce_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// acpChunk is the demo's agent_message_chunk payload.
func acpChunk(session, s string) payload {
	return payload{"agent_message_chunk", map[string]any{"sessionId": session,
		"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": s}}}}
}

func acpText(t testing.TB, ev eventbus.Event) string {
	t.Helper()
	s, _ := field(t, ev, "update", "content", "text").(string)
	return s
}

// A resume that replays 1,000 token deltas arrives as one frame, then
// replay_complete; live deltas after it are never merged with replayed ones.
func TestReplayOfThousandDeltasIsOneFrame(t *testing.T) {
	b := newBus(t, eventbus.Options{ReplayBufferSize: 2000})
	var want strings.Builder
	var ids []uint64
	for i := range 1000 {
		s := string(rune('a'+i%26)) + string(rune('a'+(i/26)%26))
		want.WriteString(s)
		ids = append(ids, pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", s))).ID)
	}
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(0), Coalesce: coalesce.ACP})
	live := pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", "LIVE")))

	got := next(t, sub)
	assert.True(t, got.Replay)
	assert.Equal(t, want.String(), acpText(t, got))
	assert.Equal(t, 1000, got.Count)
	assert.Equal(t, ids[0], got.FirstID)
	assert.Equal(t, ids[999], got.ID)
	assert.Equal(t, frame.TypeReplayComplete, next(t, sub).Type)
	l := next(t, sub)
	assert.False(t, l.Replay)
	assert.Equal(t, "LIVE", acpText(t, l))
	assert.Equal(t, live.ID, l.ID)
}

// A gap announced by a frame (events_dropped) ends a run: the deltas before
// and after it are never merged into one.
func TestNeverMergesAcrossAnnouncedGap(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, MaxQueued: 4,
		Policy: eventbus.DropNewest, SlowClientWarning: new(bool)})
	for _, s := range []string{"a", "b", "c", "d", "X", "Y"} { // X, Y are dropped
		pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", s)))
	}
	got := next(t, sub)
	assert.Equal(t, "abcd", acpText(t, got))
	gap := next(t, sub)
	require.Equal(t, frame.TypeStateResyncRequired, gap.Type)
	after := pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", "e")))
	got = next(t, sub)
	assert.Equal(t, "e", acpText(t, got))
	assert.Equal(t, after.ID, got.ID)
	assert.Zero(t, got.Count)
}

// Origins, types and the ACP tool_call_update key (tool call and status)
// separate runs; tool_call passes through.
func TestACPRuleSet(t *testing.T) {
	upd := func(id, status string, content ...any) payload {
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status}
		if content != nil {
			u["content"] = content
		}
		return payload{"tool_call_update", map[string]any{"sessionId": "s1", "update": u}}
	}
	planP := func(n int) payload {
		return payload{"plan", map[string]any{"sessionId": "s1", "update": map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"n": n}}}}}
	}
	thought := payload{"agent_thought_chunk", map[string]any{"sessionId": "s1",
		"update": map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": "hm"}}}}
	image := payload{"agent_message_chunk", map[string]any{"sessionId": "s1",
		"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "image", "data": "AAAA"}}}}
	batch := events(t,
		in("s1", acpChunk("s1", "a")), in("s1", acpChunk("s1", "b")), // merge
		in("s1", thought), in("s1", thought), // merge, separately
		in("s1", image), in("s1", acpChunk("s1", "c")), // image passes through
		in("s1", upd("t1", "in_progress", map[string]any{"type": "content", "n": 1})),
		in("s1", upd("t1", "in_progress", map[string]any{"type": "content", "n": 2})), // merge with the one before
		in("s1", upd("t1", "completed")),                                              // another status
		in("s1", upd("t2", "completed")),                                              // another tool call
		in("s1", planP(1)), in("s1", planP(2)),                                        // last wins
	)
	got := eventbus.Coalesce(coalesce.ACP, batch)
	var types []string
	var counts []int
	for _, ev := range got {
		types = append(types, ev.Type)
		counts = append(counts, max(ev.Count, 1))
	}
	assert.Equal(t, []string{"agent_message_chunk", "agent_thought_chunk", "agent_message_chunk", "agent_message_chunk",
		"tool_call_update", "tool_call_update", "tool_call_update", "plan"}, types)
	assert.Equal(t, []int{2, 2, 1, 1, 2, 1, 1, 2}, counts)
	assert.Equal(t, "ab", acpText(t, got[0]))
	assert.Equal(t, "hmhm", field(t, got[1], "update", "content", "text"))
	assert.Equal(t, []any{map[string]any{"type": "content", "n": 2.0}}, field(t, got[4], "update", "content"), "the later content replaces the earlier")
	_, has := field(t, got[5], "update").(map[string]any)["content"]
	assert.False(t, has, "no content anywhere: none added")
	assert.EqualValues(t, 2, field(t, got[7], "update", "entries").([]any)[0].(map[string]any)["n"])

	// Origins never mix.
	o := events(t, in("s1", acpChunk("s1", "a")), in("s1", acpChunk("s1", "b")))
	o[1].Origin = "client-2"
	assert.Len(t, eventbus.Coalesce(coalesce.ACP, o), 2)
}

// Users supply their own keys and merges as values.
func TestCustomRuleSet(t *testing.T) {
	rs := coalesce.ACPRules
	rs.Name = "mine"
	rs.Rules = append(append([]coalesce.Rule(nil), rs.Rules...),
		coalesce.Rule{Group: "log", Types: []string{"log_line"}, KeyPaths: []string{"stream"},
			Merge: coalesce.Merge{Op: coalesce.Concat, Path: "line"}},
		coalesce.Rule{Group: "count", Types: []string{"tick"},
			Merge: coalesce.Merge{Op: coalesce.Custom, Func: func(evs []eventbus.Event) (json.RawMessage, error) {
				return []byte(`{"ticks":` + string(rune('0'+len(evs))) + `}`), nil
			}}},
	)
	set, err := coalesce.Compile(rs)
	require.NoError(t, err)
	got := eventbus.Coalesce(set, events(t,
		in("s1", payload{"log_line", map[string]any{"stream": "stdout", "line": "a\n"}}),
		in("s1", payload{"log_line", map[string]any{"stream": "stdout", "line": "b\n"}}),
		in("s1", payload{"log_line", map[string]any{"stream": "stderr", "line": "oops\n"}}),
		in("s1", payload{"tick", map[string]any{}}), in("s1", payload{"tick", map[string]any{}}), in("s1", payload{"tick", map[string]any{}}),
		in("s1", acpChunk("s1", "x")), in("s1", acpChunk("s1", "y")),
	))
	require.Len(t, got, 4)
	assert.Equal(t, "a\nb\n", field(t, got[0], "line"))
	assert.Equal(t, "oops\n", field(t, got[1], "line"))
	assert.JSONEq(t, `{"ticks":3}`, string(got[2].Data))
	assert.Equal(t, "xy", acpText(t, got[3]))

	// Compile names what is wrong.
	for _, bad := range []coalesce.RuleSet{
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Merge: coalesce.Merge{Op: coalesce.Last}}}},
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Types: []string{"t"}, Merge: coalesce.Merge{Op: coalesce.Concat}}}},
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Types: []string{"t"}, Merge: coalesce.Merge{Op: coalesce.Custom}}}},
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Types: []string{"t"}}}},
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Types: []string{"run_started"}, Merge: coalesce.Merge{Op: coalesce.Last}}}, Immediate: []string{"run_started"}},
		{Name: "x", Rules: []coalesce.Rule{{Group: "g", Types: []string{"t"}, Merge: coalesce.Merge{Op: coalesce.Concat, Path: "a..b"}}}},
	} {
		_, err := coalesce.Compile(bad)
		require.ErrorIs(t, err, coalesce.ErrInvalidRule)
		assert.Contains(t, err.Error(), `"x"`)
	}
	// A failing merge delivers the events unmerged, in order.
	failing := coalesce.MustCompile(coalesce.RuleSet{Name: "f", Rules: []coalesce.Rule{{Types: []string{"t"},
		Merge: coalesce.Merge{Op: coalesce.Custom, Func: func([]eventbus.Event) (json.RawMessage, error) { return nil, assert.AnError }}}}})
	in3 := events(t, in("s1", payload{"t", 1}), in("s1", payload{"t", 2}), in("s1", payload{"t", 3}))
	assert.Equal(t, in3, eventbus.Coalesce(failing, in3))
}

func TestSubscribeOptionsValidated(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	_, err := b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Throttle: time.Second})
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.Contains(t, err.Error(), "1s")
	_, err = b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: -time.Millisecond})
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.Contains(t, err.Error(), "-1ms")
}

// Events() and the pump merge the same way.
func TestEventsChannelMerges(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP})
	for _, s := range []string{"he", "ll", "o"} {
		pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", s)))
	}
	require.NoError(t, b.CloseSession("s1"))
	var got []eventbus.Event
	for ev := range sub.Events() {
		got = append(got, ev)
	}
	require.ErrorIs(t, sub.Err(), eventbus.ErrSessionClosed)
	got = withoutClosed(t, got)
	require.Len(t, got, 1)
	assert.Equal(t, "hello", acpText(t, got[0]))
}

// The throttle holds deltas for the window and merges them; another event
// hands the held delta out first; the end of the subscription flushes it.
func TestThrottle(t *testing.T) {
	const window = 200 * time.Millisecond
	chunk := func(b *eventbus.Bus, s string) eventbus.Event {
		return pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", s)))
	}

	t.Run("first delta after a quiet window goes at once, the next are held and merged", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: window})
		chunk(b, "a")
		got, ok := sub.TryNext()
		require.True(t, ok)
		assert.Equal(t, "a", acpText(t, got))
		start := time.Now()
		chunk(b, "b")
		_, ok = sub.TryNext()
		assert.False(t, ok, "held: within the window")
		c := chunk(b, "c")
		got = next(t, sub) // blocks until the window ends
		assert.GreaterOrEqual(t, time.Since(start), window/2)
		assert.Equal(t, "bc", acpText(t, got))
		assert.Equal(t, c.ID, got.ID)
	})

	t.Run("another event flushes the held delta first", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: time.Minute})
		chunk(b, "a")
		require.Equal(t, "a", acpText(t, next(t, sub)))
		chunk(b, "b")
		chunk(b, "c")
		_, ok := sub.TryNext()
		require.False(t, ok)
		tool := pub(t, b, "s1", "tool_call", map[string]any{"sessionId": "s1", "update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1"}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // far less than the window
		defer cancel()
		got, err := sub.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, "bc", acpText(t, got))
		got, err = sub.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, tool.ID, got.ID)
	})

	for _, end := range []struct {
		name string
		do   func(b *eventbus.Bus, sub *eventbus.Subscription, cancel context.CancelFunc)
		err  error
	}{
		{"close", func(_ *eventbus.Bus, sub *eventbus.Subscription, _ context.CancelFunc) { sub.Close() }, eventbus.ErrUnsubscribed},
		{"context end", func(_ *eventbus.Bus, _ *eventbus.Subscription, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"bus close", func(b *eventbus.Bus, _ *eventbus.Subscription, _ context.CancelFunc) { _ = b.Close() }, eventbus.ErrClosed},
	} {
		t.Run(end.name+" flushes", func(t *testing.T) {
			b := newBus(t, eventbus.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sub, err := b.Subscribe(ctx, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: time.Minute})
			require.NoError(t, err)
			defer sub.Close()
			chunk(b, "a")
			require.Equal(t, "a", acpText(t, next(t, sub)))
			chunk(b, "b")
			chunk(b, "c")
			_, ok := sub.TryNext()
			require.False(t, ok)
			end.do(b, sub, cancel)
			got, err := sub.Next(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "bc", acpText(t, got))
			_, err = sub.Next(context.Background())
			require.ErrorIs(t, err, end.err)
		})
	}

	t.Run("eviction flushes before client_evicted", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: time.Minute,
			MaxQueued: 2, Policy: eventbus.DropSubscriber, SlowClientWarning: new(bool)})
		chunk(b, "a")
		require.Equal(t, "a", acpText(t, next(t, sub)))
		chunk(b, "b")
		_, ok := sub.TryNext() // b is held by the consumer, out of the queue
		require.False(t, ok)
		pub(t, b, "s1", "note", map[string]any{})
		pub(t, b, "s1", "note", map[string]any{})
		pub(t, b, "s1", "note", map[string]any{}) // overflows: evicted
		got, err := drain(t, sub)
		require.ErrorIs(t, err, eventbus.ErrEvicted)
		var types []string
		for _, ev := range got {
			types = append(types, ev.Type)
		}
		assert.Equal(t, []string{"agent_message_chunk", "note", "note", frame.TypeClientEvicted}, types)
		assert.Equal(t, "b", acpText(t, got[0]))
	})

	t.Run("caller's context end hands out the held delta", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: time.Minute})
		chunk(b, "a")
		require.Equal(t, "a", acpText(t, next(t, sub)))
		chunk(b, "b")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		got, err := sub.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, "b", acpText(t, got))
		ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel2()
		_, err = sub.Next(ctx2)
		require.ErrorIs(t, err, context.DeadlineExceeded, "nothing held, nothing queued")
		require.NoError(t, sub.Err())
	})
}

// Holding deltas costs no goroutine: 200 throttled subscribers, each
// holding a merged delta in its window, leave the goroutine count as it
// was; each hands its delta out on the first read after the window. Runs on
// synctest's clock, so "after the window" is exact.
func TestThrottleStartsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 500 * time.Millisecond
		b := newBus(t, eventbus.Options{MaxSubscribers: 256})
		before := runtime.NumGoroutine()
		subs := make([]*eventbus.Subscription, 200)
		for i := range subs {
			subs[i] = subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP, Throttle: window, NoReplay: true})
		}
		pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", "a")))
		for _, s := range subs {
			ev, ok := s.TryNext()
			require.True(t, ok, "the first delta after a quiet window goes at once")
			require.Equal(t, "a", acpText(t, ev))
		}
		pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", "b")))
		pub(t, b, "s1", "agent_message_chunk", mustData(acpChunk("s1", "c")))
		for _, s := range subs {
			_, ok := s.TryNext()
			require.False(t, ok, "held in the window")
		}
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine per subscriber")
		time.Sleep(window)
		for _, s := range subs {
			ev, ok := s.TryNext()
			require.True(t, ok)
			assert.Equal(t, "bc", acpText(t, ev))
			assert.Equal(t, 2, ev.Count)
		}
	})
}

// Issue 18.9: AgentPool drops a part_delta only when its delta is None. A
// part_delta of any other unexpected shape — no delta field, a delta that is
// a string, a payload that is not an object, no payload — passes through
// unmerged; only the explicit null is dropped. Checked on a subscription's
// replay and live stream, and on eventbus.Coalesce of one batch.
func TestPartDeltaOfUnexpectedShapePassesThrough(t *testing.T) {
	shapes := []struct {
		name string
		data any
	}{
		{"no delta field", map[string]any{"index": 0}},
		{"delta is a string", map[string]any{"index": 0, "delta": "hello"}},
		{"payload is an array", []any{1, 2}},
		{"no payload", nil},
		{"delta without a kind", map[string]any{"index": 0, "delta": map[string]any{"content_delta": "x"}}},
	}
	b := newBus(t, eventbus.Options{})
	var want []uint64
	publish := func() {
		pub(t, b, "s1", "part_delta", mustData(nullDelta())) // the one AgentPool drops
		for _, s := range shapes {
			want = append(want, pub(t, b, "s1", "part_delta", s.data).ID)
		}
	}
	publish()
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(0), Coalesce: coalesce.AgentPool})
	publish()
	var got []uint64
	for len(got) < len(want) {
		ev := next(t, sub)
		if ev.Type == frame.TypeReplayComplete {
			continue
		}
		require.Equal(t, "part_delta", ev.Type)
		assert.Zero(t, ev.Count, "event %d was merged", ev.ID)
		got = append(got, ev.ID)
	}
	assert.Equal(t, want, got, "every part_delta but the null delta arrives, in order")
	ev, ok := sub.TryNext()
	assert.False(t, ok, "nothing else queued, got %+v", ev)

	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			batch := events(t, in("s1", payload{"part_delta", s.data}))
			key, drop := coalesce.AgentPool.Key(batch[0])
			assert.False(t, drop)
			assert.Empty(t, key)
			assert.Len(t, eventbus.Coalesce(coalesce.AgentPool, batch), 1)
		})
	}
	dropped := events(t, in("s1", nullDelta()))
	_, drop := coalesce.AgentPool.Key(dropped[0])
	assert.True(t, drop, "an explicit null delta is still dropped, as AgentPool's delta=None")
}
