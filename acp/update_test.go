package acp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
)

func ptr[T any](v T) *T { return &v }

// Each helper writes the JSON of the protocol's schema (version 1):
// "sessionUpdate" beside the members its kind defines, required members
// present even when empty, optional ones left out.
func TestUpdatesMarshalAsTheSchemaSays(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		u    acp.Update
		want string
	}{
		{"message chunk", acp.MessageChunk("Hel"),
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}`},
		{"empty text keeps text", acp.MessageChunk(""),
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}`},
		{"thought chunk", acp.ThoughtChunk("hmm"),
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}`},
		{"user chunk with message id", acp.ContentChunk{Kind: acp.TypeUserMessageChunk, Content: acp.Text("hi"), MessageID: "m1"},
			`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m1"}`},
		{"image chunk", acp.ContentChunk{Kind: acp.TypeMessageChunk, Content: acp.ContentBlock{Type: "image", Data: "AA==", MimeType: "image/png"}},
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}`},
		{"tool call", acp.ToolCall{ToolCallID: "t1", Title: "Read a.go", Kind: "read", Status: acp.StatusPending,
			RawInput: map[string]any{"path": "a.go"}, Locations: []acp.Location{{Path: "a.go", Line: ptr(3)}}},
			`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a.go","kind":"read","status":"pending","locations":[{"path":"a.go","line":3}],"rawInput":{"path":"a.go"}}`},
		{"minimal tool call", acp.ToolCall{ToolCallID: "t1", Title: ""},
			`{"sessionUpdate":"tool_call","toolCallId":"t1","title":""}`},
		{"tool call update", acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusCompleted,
			Content: []acp.ToolCallContent{acp.TextContent("ok")}, RawOutput: json.RawMessage(`{"n":1}`)},
			`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}],"rawOutput":{"n":1}}`},
		{"diff and terminal", acp.ToolCallUpdate{ToolCallID: "t2", Content: []acp.ToolCallContent{
			acp.DiffContent("/a.go", nil, ""), acp.DiffContent("/b.go", ptr("x"), "y"), acp.TerminalContent("term-1")}},
			`{"sessionUpdate":"tool_call_update","toolCallId":"t2","content":[{"type":"diff","path":"/a.go","newText":""},{"type":"diff","path":"/b.go","oldText":"x","newText":"y"},{"type":"terminal","terminalId":"term-1"}]}`},
		{"plan", acp.Plan{Entries: []acp.PlanEntry{{Content: "Read", Priority: "high", Status: "pending"}}},
			`{"sessionUpdate":"plan","entries":[{"content":"Read","priority":"high","status":"pending"}]}`},
		{"empty plan", acp.Plan{}, `{"sessionUpdate":"plan","entries":[]}`},
		{"other", acp.Other{Kind: "usage_update", Raw: json.RawMessage(`{"sessionUpdate":"usage_update","used":5}`)},
			`{"sessionUpdate":"usage_update","used":5}`},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(acp.Notification{SessionID: "s1", Update: r.u})
			require.NoError(t, err)
			assert.JSONEq(t, `{"sessionId":"s1","update":`+r.want+`}`, string(b))
			got, err := acp.Parse(b)
			require.NoError(t, err)
			assert.Equal(t, "s1", got.SessionID)
			assert.Equal(t, r.u.Type(), got.Type())
			again, err := json.Marshal(got.Update)
			require.NoError(t, err)
			assert.JSONEq(t, r.want, string(again), "Parse then Marshal gives the same JSON")
		})
	}
}

func TestParseRefusesWhatIsNotANotification(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		``, `[]`, `{"text":"Hel"}`, `{"update":"x"}`, `{"update":{}}`, `{"update":{"sessionUpdate":3}}`,
		`{"update":{"sessionUpdate":"agent_message_chunk"}}`,
		`{"update":{"sessionUpdate":"agent_message_chunk","content":"Hel"}}`,
		`{"update":{"sessionUpdate":"tool_call","title":"x"}}`,
		`{"update":{"sessionUpdate":"tool_call_update","toolCallId":7}}`,
		`{"update":{"sessionUpdate":"plan","entries":{}}}`,
	} {
		_, err := acp.Parse([]byte(data))
		assert.ErrorIs(t, err, acp.ErrShape, "%s", data)
	}
}
