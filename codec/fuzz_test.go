package codec_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// Whatever JSON an event of a known type carries, decoding never panics,
// every part carries the event's id and a kind, and the JSON it holds
// (input, output, data) is valid.
func FuzzDecode(f *testing.F) {
	types := []string{"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan",
		"part_start", "part_delta", "tool_call_start", "tool_call_progress", "tool_call_complete", "plan_update",
		"run_started", "run_error", "run_failed", "stream_complete", "turn_start", "turn_end", "other"}
	f.Add(uint8(0), []byte(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`))
	f.Add(uint8(3), []byte(`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed","content":null}}`))
	f.Add(uint8(6), []byte(`{"index":0,"delta":{"part_delta_kind":"tool_call","args_delta":{"a":1},"tool_call_id":"t"}}`))
	f.Add(uint8(16), []byte(`{"turn":1e3,"reason":"error"}`))
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		if !json.Valid(data) {
			return // the bus accepts valid JSON only
		}
		ev := eventbus.Event{ID: 9, Session: "s1", Type: types[int(typ)%len(types)], Data: data}
		for _, p := range codec.Default.Decode(nil, ev) {
			require.NotZero(t, p.Kind)
			assert.EqualValues(t, 9, p.ID)
			for _, raw := range []json.RawMessage{p.Input, p.Output, p.Data} {
				if len(raw) > 0 {
					assert.True(t, json.Valid(raw), "%s: %s", p.Kind, raw)
				}
			}
		}
	})
}
