package coalesce_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// AgentPool's coalescing tests (tests/orchestrator/test_event_bus.py of
// Leoyzen/agentpool), one row each, named after the Python test.

// group returns the merge group of a key ("" for passthrough).
func group(key string) string {
	parts := strings.Split(key, "\x1f")
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

func TestAgentPoolClassify(t *testing.T) {
	rows := []struct {
		python   string
		ev       mk
		group    string
		keyHas   string // a key value that must be part of the key
		wantDrop bool
	}{
		{"test_classify_text_delta", in("s1", text(0, "hello")), "delta_text", "", false},
		{"test_classify_thinking_delta", in("s1", thinking(0, "thinking")), "delta_thinking", "", false},
		{"test_classify_tool_call_delta", in("s1", toolDelta(0, "args", "tc1")), "delta_tool_call", `"tc1"`, false},
		{"test_classify_tool_call_progress", in("s1", progress("tc1", "in_progress", "")), "progress", `"in_progress"`, false},
		{"test_classify_plan_update", in("s1", plan(1)), "plan", "", false},
		{"test_classify_subagent_returns_none", in("s1", subagent()), "", "", false},
		{"test_classify_custom_returns_none", in("s1", custom()), "", "", false},
		{"test_classify_tool_result_metadata_returns_none", in("s1", toolResultMetadata()), "", "", false},
		// AgentPool: key None, and the event is dropped before grouping.
		{"test_classify_none_delta_returns_none", in("s1", nullDelta()), "", "", true},
	}
	for _, r := range rows {
		t.Run(r.python, func(t *testing.T) {
			ev := events(t, r.ev)[0]
			key, drop := coalesce.AgentPool.Key(ev)
			assert.Equal(t, r.wantDrop, drop)
			assert.Equal(t, r.group, group(key), "key %q", key)
			assert.Contains(t, key, r.keyHas)
		})
	}
	// progress keys carry the tool call id and the status
	k1, _ := coalesce.AgentPool.Key(events(t, in("s1", progress("tc1", "in_progress", "")))[0])
	k2, _ := coalesce.AgentPool.Key(events(t, in("s1", progress("tc1", "completed", "")))[0])
	k3, _ := coalesce.AgentPool.Key(events(t, in("s1", progress("tc2", "in_progress", "")))[0])
	assert.NotEqual(t, k1, k2)
	assert.NotEqual(t, k1, k3)
}

func TestAgentPoolImmediate(t *testing.T) {
	lifecycleTypes := []string{"run_started", "run_error", "run_failed", "stream_complete", "spawn_session_start",
		"compaction", "session_resume", "tool_call_start", "tool_call_complete", "tool_call_deferred", "elicitation_deferred"}
	for _, typ := range lifecycleTypes {
		t.Run("test_immediate_returns_true_for_lifecycle_events/"+typ, func(t *testing.T) {
			assert.True(t, coalesce.AgentPool.Immediate(typ))
			key, drop := coalesce.AgentPool.Key(events(t, in("s1", lifecycle(typ)))[0])
			assert.Empty(t, key)
			assert.False(t, drop)
		})
	}
	rows := []struct {
		python string
		ev     mk
	}{
		{"test_immediate_returns_false_for_text_delta", in("s1", text(0, "hello"))},
		{"test_immediate_returns_false_for_thinking_delta", in("s1", thinking(0, "thinking"))},
		{"test_immediate_returns_false_for_tool_call_delta", in("s1", toolDelta(0, "args", "tc1"))},
		{"test_immediate_returns_false_for_tool_call_progress", in("s1", progress("tc1", "in_progress", ""))},
		{"test_immediate_returns_false_for_plan_update", in("s1", plan(1))},
		{"test_immediate_returns_false_for_subagent_event", in("s1", subagent())},
		{"test_immediate_returns_false_for_custom_event", in("s1", custom())},
		{"test_immediate_returns_false_for_tool_result_metadata", in("s1", toolResultMetadata())},
	}
	for _, r := range rows {
		t.Run(r.python, func(t *testing.T) {
			assert.False(t, coalesce.AgentPool.Immediate(r.ev.typ))
		})
	}
}

// mergeOf runs a merge helper: AgentPool.Merge with the key of the first
// event.
func mergeOf(t *testing.T, evs []eventbus.Event) eventbus.Event {
	t.Helper()
	key, _ := coalesce.AgentPool.Key(evs[0])
	require.NotEmpty(t, key)
	data, err := coalesce.AgentPool.Merge(key, evs)
	require.NoError(t, err)
	out := evs[len(evs)-1]
	out.Data = data
	return out
}

func TestAgentPoolMergeHelpers(t *testing.T) {
	rows := []struct {
		python string
		in     []mk
		check  func(t *testing.T, got eventbus.Event)
	}{
		{"test_merge_text_deltas_concatenates_content", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world")), in("s1", text(0, "!"))},
			func(t *testing.T, got eventbus.Event) { assert.Equal(t, "hello world!", delta(t, got)) }},
		{"test_merge_text_deltas_uses_first_index", []mk{in("s1", text(5, "a")), in("s1", text(7, "b"))},
			func(t *testing.T, got eventbus.Event) { assert.EqualValues(t, 5, field(t, got, "index")) }},
		{"test_merge_thinking_deltas_concatenates_content", []mk{in("s1", thinking(0, "think ")), in("s1", thinking(0, "more"))},
			func(t *testing.T, got eventbus.Event) {
				assert.Equal(t, "think more", delta(t, got))
				assert.Equal(t, "thinking", field(t, got, "delta", "part_delta_kind"))
			}},
		{"test_merge_thinking_deltas_uses_first_index", []mk{in("s1", thinking(3, "a")), in("s1", thinking(7, "b"))},
			func(t *testing.T, got eventbus.Event) { assert.EqualValues(t, 3, field(t, got, "index")) }},
		{"test_merge_tool_call_deltas_concatenates_args", []mk{in("s1", toolDelta(0, `{"path"`, "tc1")), in("s1", toolDelta(0, `: "foo"}`, "tc1"))},
			func(t *testing.T, got eventbus.Event) {
				assert.Equal(t, `{"path": "foo"}`, field(t, got, "delta", "args_delta"))
			}},
		{"test_merge_tool_call_deltas_uses_first_index_and_tool_call_id", []mk{in("s1", toolDelta(2, "a", "tc-first")), in("s1", toolDelta(5, "b", "tc-second"))},
			func(t *testing.T, got eventbus.Event) {
				assert.EqualValues(t, 2, field(t, got, "index"))
				assert.Equal(t, "tc-first", field(t, got, "delta", "tool_call_id"))
				assert.Equal(t, "ab", field(t, got, "delta", "args_delta"))
			}},
		{"test_merge_progress_events_concatenates_items",
			[]mk{in("s1", progress("tc1", "in_progress", "", terminal("t1"))), in("s1", progress("tc1", "in_progress", "", textItem("output")))},
			func(t *testing.T, got eventbus.Event) {
				items := field(t, got, "items").([]any)
				require.Len(t, items, 2)
				assert.Equal(t, "terminal", items[0].(map[string]any)["type"])
				assert.Equal(t, "text", items[1].(map[string]any)["type"])
			}},
		{"test_merge_progress_events_uses_last_fields",
			[]mk{in("s1", progress("tc1", "in_progress", "first")), in("s1", progress("tc1", "completed", "last"))},
			func(t *testing.T, got eventbus.Event) {
				assert.Equal(t, "last", field(t, got, "title"))
				assert.Equal(t, "completed", field(t, got, "status"))
			}},
		{"test_merge_progress_events_keeps_duplicate_terminal_ids",
			[]mk{in("s1", progress("tc1", "in_progress", "", terminal("t1"))), in("s1", progress("tc1", "in_progress", "", terminal("t1")))},
			func(t *testing.T, got eventbus.Event) {
				items := field(t, got, "items").([]any)
				require.Len(t, items, 2)
				for _, it := range items {
					assert.Equal(t, "t1", it.(map[string]any)["terminal_id"])
				}
			}},
		{"test_merge_helpers_callable_without_instance", []mk{in("s1", text(0, "a")), in("s1", text(0, "b"))},
			func(t *testing.T, got eventbus.Event) { assert.Equal(t, "ab", delta(t, got)) }},
	}
	for _, r := range rows {
		t.Run(r.python, func(t *testing.T) { r.check(t, mergeOf(t, events(t, r.in...))) })
	}
	t.Run("test_merge_text_deltas_single_event", func(t *testing.T) {
		out := eventbus.Coalesce(coalesce.AgentPool, events(t, in("s1", text(0, "solo"))))
		require.Len(t, out, 1)
		assert.Equal(t, "solo", delta(t, out[0]))
		assert.Zero(t, out[0].Count, "a single event is delivered as published")
	})
}

// out describes one expected result of a merge: its type, its text (for
// part deltas) and how many events it holds.
type out struct {
	typ   string
	text  string
	count int
}

func describe(t *testing.T, evs []eventbus.Event) []out {
	t.Helper()
	var got []out
	for _, ev := range evs {
		o := out{typ: ev.Type, count: max(ev.Count, 1)}
		if ev.Type == "part_delta" {
			o.text = delta(t, ev)
			if o.text == "" {
				o.text, _ = field(t, ev, "delta", "args_delta").(string)
			}
		}
		got = append(got, o)
	}
	return got
}

func TestAgentPoolMergeEnvelopes(t *testing.T) {
	const pd = "part_delta"
	rows := []struct {
		python string
		in     []mk
		want   []out
	}{
		{"test_merge_envelopes_groups_consecutive_text_deltas", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world"))},
			[]out{{pd, "hello world", 2}}},
		{"test_merge_envelopes_type_change_creates_separate_groups", []mk{in("s1", text(0, "text")), in("s1", thinking(0, "think"))},
			[]out{{pd, "text", 1}, {pd, "think", 1}}},
		{"test_merge_envelopes_drops_none_delta", []mk{in("s1", text(0, "keep")), in("s1", nullDelta()), in("s1", text(0, "this"))},
			[]out{{pd, "keepthis", 2}}},
		{"test_merge_envelopes_plan_last_wins", []mk{in("s1", plan(1)), in("s1", plan(2)), in("s1", plan(3))},
			[]out{{"plan_update", "", 3}}},
		{"test_merge_envelopes_passthrough_extends_without_merging", []mk{in("s1", subagent()), in("s1", custom())},
			[]out{{"subagent", "", 1}, {"custom", "", 1}}},
		{"test_merge_envelopes_empty_list_returns_empty", nil, nil},
		{"test_merge_envelopes_tool_call_progress_merged",
			[]mk{in("s1", progress("tc1", "in_progress", "first", terminal("t1"))), in("s1", progress("tc1", "in_progress", "second", textItem("out")))},
			[]out{{"tool_call_progress", "", 2}}},
		{"test_merge_envelopes_different_tool_call_ids_not_merged",
			[]mk{in("s1", progress("tc1", "in_progress", "")), in("s1", progress("tc2", "in_progress", ""))},
			[]out{{"tool_call_progress", "", 1}, {"tool_call_progress", "", 1}}},
		{"test_merge_envelopes_different_status_not_merged",
			[]mk{in("s1", progress("tc1", "in_progress", "")), in("s1", progress("tc1", "completed", ""))},
			[]out{{"tool_call_progress", "", 1}, {"tool_call_progress", "", 1}}},
		{"test_merge_envelopes_retains_event_type", []mk{in("s1", text(0, "a")), in("s1", text(0, "b"))},
			[]out{{pd, "ab", 2}}},
		{"test_merge_envelopes_non_consecutive_same_key_not_merged", []mk{in("s1", text(0, "a")), in("s1", thinking(0, "b")), in("s1", text(0, "c"))},
			[]out{{pd, "a", 1}, {pd, "b", 1}, {pd, "c", 1}}},
		{"test_merge_envelopes_preserves_source_session_id", []mk{in("custom-session", text(0, "a")), in("custom-session", text(0, "b"))},
			[]out{{pd, "ab", 2}}},
		// Raw events are wrapped with an empty source session: ours have
		// an empty Session and still merge.
		{"test_drain_and_merge_raw_events_wrapped_and_merged", []mk{in("", text(0, "raw")), in("", text(0, "_")), in("", text(0, "event"))},
			[]out{{pd, "raw_event", 3}}},
		{"test_drain_and_merge_consecutive_same_type_merges", []mk{in("s1", text(0, "hello")), in("s1", text(0, " ")), in("s1", text(0, "world"))},
			[]out{{pd, "hello world", 3}}},
		{"test_drain_and_merge_type_change_creates_separate_groups",
			[]mk{in("s1", text(0, "foo")), in("s1", text(0, "bar")), in("s1", thinking(0, "think")), in("s1", thinking(0, "ing"))},
			[]out{{pd, "foobar", 2}, {pd, "thinking", 2}}},
		{"test_drain_and_merge_endofstream_on_initial_receive", nil, nil},
	}
	for _, r := range rows {
		t.Run(r.python, func(t *testing.T) {
			batch := events(t, r.in...)
			got := eventbus.Coalesce(coalesce.AgentPool, batch)
			assert.Equal(t, r.want, describe(t, got))
			for _, ev := range got {
				if ev.Count > 1 {
					assert.Equal(t, r.in[0].session, ev.Session, "source session kept")
				}
			}
		})
	}
	t.Run("test_merge_envelopes_plan_last_wins/payload", func(t *testing.T) {
		got := eventbus.Coalesce(coalesce.AgentPool, events(t, in("s1", plan(1)), in("s1", plan(2)), in("s1", plan(3))))
		require.Len(t, got, 1)
		assert.EqualValues(t, 3, field(t, got[0], "entries").([]any)[0].(map[string]any)["n"])
	})
}

// TestAgentPoolDrainAndMerge publishes through the bus, closes the
// session and drains the subscription, as the Python tests do.
func TestAgentPoolDrainAndMerge(t *testing.T) {
	const pd = "part_delta"
	rows := []struct {
		python string
		pub    []mk
		// want per session subscribed to (the sessions of pub, in order)
		want map[string][]out
	}{
		{"test_coalescing_type_change_flush", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world")), in("s1", thinking(0, "thinking..."))},
			map[string][]out{"s1": {{pd, "hello world", 2}, {pd, "thinking...", 1}}}},
		{"test_coalescing_immediate_event_drains_buffer", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world")), in("s1", lifecycle("stream_complete"))},
			map[string][]out{"s1": {{pd, "hello world", 2}, {"stream_complete", "", 1}}}},
		{"test_coalescing_immediate_event_empty_buffer", []mk{in("s1", lifecycle("stream_complete"))},
			map[string][]out{"s1": {{"stream_complete", "", 1}}}},
		{"test_coalescing_per_session_isolation", []mk{in("sess-a", text(0, "hello-a")), in("sess-b", text(0, "hello-b"))},
			map[string][]out{"sess-a": {{pd, "hello-a", 1}}, "sess-b": {{pd, "hello-b", 1}}}},
		{"test_coalescing_passthrough_subagent_drains_buffer", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world")), in("s1", subagent())},
			map[string][]out{"s1": {{pd, "hello world", 2}, {"subagent", "", 1}}}},
		{"test_coalescing_passthrough_custom_drains_buffer", []mk{in("s1", text(0, "data")), in("s1", custom())},
			map[string][]out{"s1": {{pd, "data", 1}, {"custom", "", 1}}}},
		{"test_coalescing_passthrough_tool_result_metadata_drains_buffer", []mk{in("s1", text(0, "data")), in("s1", toolResultMetadata())},
			map[string][]out{"s1": {{pd, "data", 1}, {"tool_result_metadata", "", 1}}}},
		{"test_coalescing_non_consecutive_same_key_not_merged", []mk{in("s1", text(0, "a")), in("s1", thinking(0, "b")), in("s1", text(0, "c"))},
			map[string][]out{"s1": {{pd, "a", 1}, {pd, "b", 1}, {pd, "c", 1}}}},
		{"test_coalescing_none_delta_dropped", []mk{in("s1", nullDelta())},
			map[string][]out{"s1": nil}},
		{"test_coalescing_plan_update_last_wins", []mk{in("s1", plan(1)), in("s1", plan(2)), in("s1", plan(3))},
			map[string][]out{"s1": {{"plan_update", "", 3}}}},
		{"test_close_session_drains_buffer", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world"))},
			map[string][]out{"s1": {{pd, "hello world", 2}}}},
		{"test_coalescing_lifecycle_alongside_batchable", []mk{in("s1", text(0, "hello ")), in("s1", text(0, "world")), in("s1", lifecycle("tool_call_start"))},
			map[string][]out{"s1": {{pd, "hello world", 2}, {"tool_call_start", "", 1}}}},
		{"test_coalescing_passthrough_alongside_batchable", []mk{in("s1", text(0, "data1 ")), in("s1", text(0, "data2")), in("s1", subagent())},
			map[string][]out{"s1": {{pd, "data1 data2", 2}, {"subagent", "", 1}}}},
		{"test_coalescing_per_session_drain_isolation",
			[]mk{in("sess-a", text(0, "a1 ")), in("sess-a", text(0, "a2")), in("sess-a", lifecycle("run_started")),
				in("sess-b", thinking(0, "b1 ")), in("sess-b", thinking(0, "b2")), in("sess-b", lifecycle("run_started"))},
			map[string][]out{"sess-a": {{pd, "a1 a2", 2}, {"run_started", "", 1}}, "sess-b": {{pd, "b1 b2", 2}, {"run_started", "", 1}}}},
		{"test_coalescing_plan_update_last_wins_in_drain", []mk{in("s1", text(0, "text1 ")), in("s1", plan(1)), in("s1", plan(2)), in("s1", text(0, "text2"))},
			map[string][]out{"s1": {{pd, "text1 ", 1}, {"plan_update", "", 2}, {pd, "text2", 1}}}},
		{"test_coalescing_spawn_session_start_in_drain", []mk{in("s1", text(0, "before ")), in("s1", text(0, "spawn")), in("s1", lifecycle("spawn_session_start"))},
			map[string][]out{"s1": {{pd, "before spawn", 2}, {"spawn_session_start", "", 1}}}},
		{"test_coalescing_noop_consumer_drains_queue", []mk{in("s1", text(0, "chunk0 ")), in("s1", text(0, "chunk1 ")), in("s1", text(0, "chunk2"))},
			map[string][]out{"s1": {{pd, "chunk0 chunk1 chunk2", 3}}}},
		{"test_drain_and_merge_endofstream_mid_drain", []mk{in("s1", text(0, "a")), in("s1", text(0, "b")), in("s1", text(0, "c"))},
			map[string][]out{"s1": {{pd, "abc", 3}}}},
	}
	for _, r := range rows {
		t.Run(r.python, func(t *testing.T) {
			b := newBus(t, eventbus.Options{})
			subs := map[string]*eventbus.Subscription{}
			for _, m := range r.pub {
				if subs[m.session] == nil {
					subs[m.session] = subscribe(t, b, m.session, eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
				}
			}
			for _, m := range r.pub {
				pub(t, b, m.session, m.typ, m.data)
			}
			for s := range subs {
				require.NoError(t, b.CloseSession(s))
			}
			for s, sub := range subs {
				got, err := drain(t, sub)
				require.ErrorIs(t, err, eventbus.ErrSessionClosed)
				assert.Equal(t, r.want[s], describe(t, withoutClosed(t, got)), "session %s", s)
			}
		})
	}

	t.Run("test_coalescing_100_consecutive_text_deltas", func(t *testing.T) {
		b := newBus(t, eventbus.Options{ReplayBufferSize: 200})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
		var want strings.Builder
		var last uint64
		for i := range 100 {
			s := "chunk" + strings.Repeat("x", i%3) + " "
			want.WriteString(s)
			last = pub(t, b, "s1", pd, mustData(text(0, s))).ID
		}
		require.NoError(t, b.CloseSession("s1"))
		got, err := drain(t, sub)
		require.ErrorIs(t, err, eventbus.ErrSessionClosed)
		got = withoutClosed(t, got)
		require.Len(t, got, 1)
		assert.Equal(t, want.String(), delta(t, got[0]))
		assert.Equal(t, 100, got[0].Count)
		assert.Equal(t, last, got[0].ID, "the merged event carries the last id")
		assert.Equal(t, last-99, got[0].FirstID)
	})

	t.Run("test_concurrent_publish_and_close_session_no_deadlock", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 10 {
				_, err := b.Publish("s1", pd, mustData(text(0, "chunk"+string(rune('0'+i)))))
				if err != nil {
					require.ErrorIs(t, err, eventbus.ErrSessionClosed)
					return
				}
			}
		}()
		require.NoError(t, b.CloseSession("s1"))
		<-done
		got, err := drain(t, sub)
		require.ErrorIs(t, err, eventbus.ErrSessionClosed)
		text := ""
		for _, ev := range withoutClosed(t, got) {
			text += delta(t, ev)
		}
		assert.True(t, strings.HasPrefix("chunk0chunk1chunk2chunk3chunk4chunk5chunk6chunk7chunk8chunk9", text), "text %q", text)
	})

	for _, name := range []string{"test_drain_and_merge_endofstream_on_initial_receive", "test_drain_and_merge_closed_resource_on_initial_receive"} {
		t.Run(name+"/bus", func(t *testing.T) {
			b := newBus(t, eventbus.Options{})
			sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
			require.NoError(t, b.CloseSession("s1"))
			got, err := drain(t, sub)
			require.ErrorIs(t, err, eventbus.ErrSessionClosed)
			assert.Empty(t, withoutClosed(t, got), "nothing but the end")
		})
	}

	t.Run("test_drain_and_merge_wouldblock_ends_batch", func(t *testing.T) {
		// What is queued when the consumer takes is one batch; what comes
		// later is the next one.
		b := newBus(t, eventbus.Options{})
		sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
		for _, s := range []string{"x", "y", "z"} {
			pub(t, b, "s1", pd, mustData(text(0, s)))
		}
		got, ok := sub.TryNext()
		require.True(t, ok)
		assert.Equal(t, "xyz", delta(t, got))
		_, ok = sub.TryNext()
		assert.False(t, ok, "the batch ended when the queue was empty")
		pub(t, b, "s1", pd, mustData(text(0, "later")))
		got, ok = sub.TryNext()
		require.True(t, ok)
		assert.Equal(t, "later", delta(t, got))
		assert.Zero(t, got.Count)
	})
}

func mustData(p payload) any { return p.data }

// Where this port deliberately differs: two flaws of AgentPool's
// coalescing, each test named after the Python test that pins the flawed
// behaviour, then (after the underscore) what this package does instead.

// Flaw 1 of AgentPool's drain_and_merge: _rebind keeps the FIRST merged
// envelope's event_id (test_rebind_preserves_source_session_id checks the
// template's fields are kept), so a client that saw the merged frame and
// resumes from its id is replayed the rest of the run again. Ours carries
// the last id; resuming from the id AgentPool would give repeats text.
func TestRebindPreservesSourceSessionID_MergedIDIsLast(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
	first := pub(t, b, "s1", "part_delta", mustData(text(0, "hello ")))
	pub(t, b, "s1", "part_delta", mustData(text(0, "big ")))
	last := pub(t, b, "s1", "part_delta", mustData(text(0, "world")))

	got, ok := sub.TryNext()
	require.True(t, ok)
	require.Equal(t, "hello big world", delta(t, got))
	assert.Equal(t, last.ID, got.ID, "a merged event carries the LAST merged id")
	assert.Equal(t, first.ID, got.FirstID)
	assert.Equal(t, 3, got.Count)

	// The client resumes from the id it saw: nothing it holds comes again.
	assert.Empty(t, resumeText(t, b, "s1", got.ID))
	// AgentPool's id (the first) would repeat "big world": the check above
	// fails on AgentPool's behaviour.
	assert.Equal(t, "big world", resumeText(t, b, "s1", got.FirstID))
}

// Flaw 2: _merge_envelopes groups by merge key only
// (test_merge_envelopes_preserves_source_session_id keeps the first
// envelope's session), so with a descendants or all scope a parent's and a
// child's consecutive text deltas merge into one, attributed to the parent.
// Ours never merges across sessions.
func TestMergeEnvelopesPreservesSourceSessionID_NeverAcrossSessions(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("parent", ""))
	require.NoError(t, b.CreateSession("child", "parent"))
	sub := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants, Coalesce: coalesce.AgentPool})
	p := pub(t, b, "parent", "part_delta", mustData(text(0, "parent says ")))
	c1 := pub(t, b, "child", "part_delta", mustData(text(0, "child ")))
	c2 := pub(t, b, "child", "part_delta", mustData(text(0, "says")))

	// AgentPool's grouping sees one key for all three: it would merge them
	// into one event attributed to "parent".
	kp, _ := coalesce.AgentPool.Key(p)
	kc, _ := coalesce.AgentPool.Key(c1)
	require.Equal(t, kp, kc)

	got := eventbus.Coalesce(coalesce.AgentPool, []eventbus.Event{p, c1, c2})
	require.Len(t, got, 2)
	assert.Equal(t, "parent", got[0].Session)
	assert.Equal(t, "parent says ", delta(t, got[0]))
	assert.Equal(t, "child", got[1].Session)
	assert.Equal(t, "child says", delta(t, got[1]))

	// The same through a live subscription.
	a, ok := sub.TryNext()
	require.True(t, ok)
	c, ok := sub.TryNext()
	require.True(t, ok)
	assert.Equal(t, []string{"parent", "child"}, []string{a.Session, c.Session})
	assert.Equal(t, "parent says ", delta(t, a))
	assert.Equal(t, "child says", delta(t, c))
	assert.Equal(t, c2.ID, c.ID)
	assert.Equal(t, c1.ID, c.FirstID)
}
