package agentpool_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/agentpool"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// Each value serialises as AgentPool's dataclass, event_kind included,
// and Parse reads it back to the same JSON.
func TestEventsMarshalAsAgentPoolDoes(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		e    agentpool.Event
		want string
	}{
		{"text delta", agentpool.TextDelta(0, "Hel"),
			`{"index":0,"delta":{"part_delta_kind":"text","content_delta":"Hel"},"event_kind":"part_delta"}`},
		{"empty thinking delta keeps content_delta", agentpool.ThinkingDelta(1, ""),
			`{"index":1,"delta":{"part_delta_kind":"thinking","content_delta":""},"event_kind":"part_delta"}`},
		{"tool call delta", agentpool.ToolCallDelta(2, `{"pa`, "tc1"),
			`{"index":2,"delta":{"part_delta_kind":"tool_call","args_delta":"{\"pa","tool_call_id":"tc1"},"event_kind":"part_delta"}`},
		{"text start", agentpool.TextStart(0, ""),
			`{"index":0,"part":{"part_kind":"text","content":""},"event_kind":"part_start"}`},
		{"tool call part start", agentpool.ToolCallPartStart(1, "read_file", "tc1"),
			`{"index":1,"part":{"part_kind":"tool-call","tool_name":"read_file","tool_call_id":"tc1"},"event_kind":"part_start"}`},
		{"tool call start", agentpool.ToolCallStart{ToolCallID: "tc1", ToolName: "read_file", Title: "Read a.go", Kind: "read",
			RawInput: map[string]string{"path": "a.go"}},
			`{"tool_call_id":"tc1","tool_name":"read_file","title":"Read a.go","kind":"read","raw_input":{"path":"a.go"},"event_kind":"tool_call_start"}`},
		{"progress", agentpool.ToolCallProgress{ToolCallID: "tc1", Status: "in_progress", Items: []agentpool.Item{agentpool.TextItem("50%")}},
			`{"tool_call_id":"tc1","status":"in_progress","items":[{"type":"text","text":"50%"}],"event_kind":"tool_call_progress"}`},
		{"progress without items", agentpool.ToolCallProgress{ToolCallID: "tc1", Status: "completed"},
			`{"tool_call_id":"tc1","status":"completed","items":[],"event_kind":"tool_call_progress"}`},
		{"complete", agentpool.ToolCallComplete{ToolName: "read_file", ToolCallID: "tc1", ToolInput: map[string]string{"path": "a.go"},
			ToolResult: "package a", AgentName: "coder", MessageID: "m1"},
			`{"tool_name":"read_file","tool_call_id":"tc1","tool_input":{"path":"a.go"},"tool_result":"package a","agent_name":"coder","message_id":"m1","event_kind":"tool_call_complete"}`},
		{"plan", agentpool.PlanUpdate{Entries: []agentpool.PlanEntry{{Content: "x", Priority: "high", Status: "pending"}}},
			`{"entries":[{"content":"x","priority":"high","status":"pending"}],"event_kind":"plan_update"}`},
		{"run started", agentpool.RunStarted{SessionID: "s1", RunID: "r1"},
			`{"session_id":"s1","run_id":"r1","event_kind":"run_started"}`},
		{"run error", agentpool.RunError{Message: "boom", Code: "model_error"},
			`{"message":"boom","code":"model_error","event_kind":"run_error"}`},
		{"stream complete", agentpool.StreamComplete{Message: map[string]string{"content": "hi"}, Cancelled: true},
			`{"message":{"content":"hi"},"cancelled":true,"event_kind":"stream_complete"}`},
		{"other", agentpool.Other{Kind: "custom", Raw: json.RawMessage(`{"event_data":1,"event_kind":"custom"}`)},
			`{"event_data":1,"event_kind":"custom"}`},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(r.e)
			require.NoError(t, err)
			assert.JSONEq(t, r.want, string(b))
			got, err := agentpool.Parse(r.e.Type(), b)
			require.NoError(t, err)
			assert.Equal(t, r.e.Type(), got.Type())
			again, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, r.want, string(again), "Parse then Marshal gives the same JSON")
		})
	}
}

func TestParseRefusesWrongShapes(t *testing.T) {
	t.Parallel()
	rows := []struct{ typ, data string }{
		{agentpool.TypePartDelta, `"x"`},
		{agentpool.TypePartDelta, `{"index":0}`},
		{agentpool.TypePartDelta, `{"index":"0","delta":{}}`},
		{agentpool.TypePartStart, `{"index":0}`},
		{agentpool.TypeToolCallStart, `{"tool_name":"x"}`},
		{agentpool.TypeToolCallProgress, `{"status":"completed"}`},
		{agentpool.TypeToolCallComplete, `{"tool_call_id":5}`},
		{agentpool.TypePlanUpdate, `{"entries":"x"}`},
	}
	for _, r := range rows {
		_, err := agentpool.Parse(r.typ, []byte(r.data))
		assert.ErrorIs(t, err, agentpool.ErrShape, "%s %s", r.typ, r.data)
	}
}

// The rule set coalesce.AgentPool recognises every helper it has a rule
// for, and lets the lifecycle events through.
func TestAgentPoolRulesRecogniseEveryHelper(t *testing.T) {
	t.Parallel()
	rows := []struct {
		e     agentpool.Event
		group string
	}{
		{agentpool.TextDelta(0, "a"), "delta_text"},
		{agentpool.ThinkingDelta(0, "a"), "delta_thinking"},
		{agentpool.ToolCallDelta(0, "{", "tc1"), "delta_tool_call"},
		{agentpool.ToolCallProgress{ToolCallID: "tc1", Status: "in_progress"}, "progress"},
		{agentpool.PlanUpdate{}, "plan"},
		{agentpool.TextStart(0, "a"), ""},
		{agentpool.ToolCallStart{ToolCallID: "tc1"}, ""},
		{agentpool.ToolCallComplete{ToolCallID: "tc1"}, ""},
		{agentpool.RunStarted{}, ""},
		{agentpool.StreamComplete{}, ""},
	}
	for i, r := range rows {
		b, err := json.Marshal(r.e)
		require.NoError(t, err)
		key, drop := coalesce.AgentPool.Key(eventbus.Event{ID: uint64(i + 1), Session: "s1", Type: r.e.Type(), Data: b})
		assert.False(t, drop)
		if r.group == "" {
			assert.Empty(t, key, r.e.Type())
			continue
		}
		assert.Contains(t, key, "\x1f"+r.group+"\x1f", r.e.Type())
	}
	var evs []eventbus.Event
	for i, s := range []string{"Hel", "lo"} {
		b, _ := json.Marshal(agentpool.TextDelta(0, s))
		evs = append(evs, eventbus.Event{ID: uint64(i + 1), Session: "s1", Type: agentpool.TypePartDelta, Data: b})
	}
	out := eventbus.Coalesce(coalesce.AgentPool, evs)
	require.Len(t, out, 1)
	got, err := agentpool.Parse(out[0].Type, out[0].Data)
	require.NoError(t, err)
	assert.Equal(t, "Hello", got.(agentpool.PartDelta).Delta.ContentDelta)
}
