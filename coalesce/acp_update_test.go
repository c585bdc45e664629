package coalesce_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// TestACPToolCallUpdateContentReplacesTheEarlier: ACP's schema says a
// tool_call_update's content "Replace[s] the content collection" (and its
// locations, rawOutput, title: every member it sets), while a member it
// leaves out keeps its value. A merged run must read as the updates
// applied in order; coalesce.ACP appended the content arrays, so an agent
// that streams a tool's output as cumulative content (each update the
// whole output so far) showed a coalesced or compacted client every
// prefix one after another.
func TestACPToolCallUpdateContentReplacesTheEarlier(t *testing.T) {
	t.Parallel()
	upd := func(u string) string {
		return `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"` + u + `}}`
	}
	for _, tc := range []struct {
		name string
		data []string
		want string // the merged update; "" for a run delivered unmerged
	}{
		{"cumulative content: the last wins",
			[]string{upd(`,"content":[{"type":"content","content":{"type":"text","text":"a"}}]`),
				upd(`,"content":[{"type":"content","content":{"type":"text","text":"ab"}}]`),
				upd(`,"content":[{"type":"content","content":{"type":"text","text":"abc"}}]`)},
			`{"content":[{"type":"content","content":{"type":"text","text":"abc"}}],"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"t1"}`},
		{"a member left out keeps its value",
			[]string{upd(`,"title":"grep","content":[{"type":"terminal","terminalId":"x"}],"locations":[{"path":"/a"}]`),
				upd(`,"rawOutput":{"n":1}`)},
			`{"content":[{"type":"terminal","terminalId":"x"}],"locations":[{"path":"/a"}],"rawOutput":{"n":1},"sessionUpdate":"tool_call_update","status":"in_progress","title":"grep","toolCallId":"t1"}`},
		{"null is not a change",
			[]string{upd(`,"content":[{"type":"terminal","terminalId":"x"}]`), upd(`,"content":null,"title":null`)},
			`{"content":[{"type":"terminal","terminalId":"x"}],"sessionUpdate":"tool_call_update","status":"in_progress","title":null,"toolCallId":"t1"}`},
		{"an empty content clears it",
			[]string{upd(`,"content":[{"type":"terminal","terminalId":"x"}]`), upd(`,"content":[]`)},
			`{"content":[],"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"t1"}`},
		{"an update that is not an object: unmerged",
			[]string{upd(`,"content":[]`), `{"sessionId":"s1","update":"x"}`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs := make([]eventbus.Event, len(tc.data))
			for i, d := range tc.data {
				evs[i] = eventbus.Event{ID: uint64(i + 1), Session: "s1", Type: "tool_call_update", Data: json.RawMessage(d)}
			}
			key, _ := coalesce.ACP.Key(evs[0])
			require.NotEmpty(t, key)
			got, err := coalesce.ACP.Merge(key, evs)
			if tc.want == "" {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			var env struct {
				SessionID string          `json:"sessionId"`
				Update    json.RawMessage `json:"update"`
			}
			require.NoError(t, json.Unmarshal(got, &env))
			assert.Equal(t, "s1", env.SessionID)
			assert.JSONEq(t, tc.want, string(env.Update))
		})
	}
}
