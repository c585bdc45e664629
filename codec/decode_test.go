package codec_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/agentpool"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// ev returns the event a subscriber gets for payload v of type typ.
func ev(t *testing.T, id uint64, typ string, v any) eventbus.Event {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return eventbus.Event{ID: id, Session: "s1", Type: typ, Data: b}
}

func acpEv(t *testing.T, id uint64, u acp.Update) eventbus.Event {
	return ev(t, id, u.Type(), acp.Notification{SessionID: "s1", Update: u})
}

func apEv(t *testing.T, id uint64, e agentpool.Event) eventbus.Event { return ev(t, id, e.Type(), e) }

// short describes a part by the fields its kind sets.
func short(p codec.Part) string {
	s := p.Kind.String()
	add := func(k, v string) {
		if v != "" {
			s += " " + k + "=" + v
		}
	}
	add("call", p.ToolCallID)
	add("name", p.ToolName)
	add("title", p.Title)
	add("text", p.Text)
	add("input", string(p.Input))
	add("output", string(p.Output))
	add("data", string(p.Data))
	add("dname", p.Name)
	add("turn", p.Turn)
	add("reason", p.Reason)
	if p.Preliminary {
		s += " preliminary"
	}
	return s
}

func decode(evs ...eventbus.Event) []string {
	var out []string
	for _, e := range evs {
		for _, p := range codec.Default.Decode(nil, e) {
			out = append(out, short(p))
		}
	}
	return out
}

func TestACPShapesDecode(t *testing.T) {
	t.Parallel()
	done := "completed"
	rows := []struct {
		name string
		ev   eventbus.Event
		want []string
	}{
		{"message chunk", acpEv(t, 1, acp.MessageChunk("Hel")), []string{"text text=Hel"}},
		{"thought chunk", acpEv(t, 1, acp.ThoughtChunk("hmm")), []string{"reasoning text=hmm"}},
		{"image chunk is data", acpEv(t, 1, acp.ContentChunk{Kind: acp.TypeMessageChunk, Content: acp.ContentBlock{Type: "image", Data: "AA==", MimeType: "image/png"}}),
			[]string{`data data={"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}} dname=agent_message_chunk`}},
		{"tool call with input", acpEv(t, 1, acp.ToolCall{ToolCallID: "t1", Title: "Read a.go", Kind: "read", RawInput: map[string]string{"path": "a.go"}}),
			[]string{"tool-input-start call=t1 name=read title=Read a.go", `tool-input call=t1 name=read title=Read a.go input={"path":"a.go"}`}},
		{"tool call without kind or input", acpEv(t, 1, acp.ToolCall{ToolCallID: "t1", Title: "x"}),
			[]string{"tool-input-start call=t1 name=other title=x"}},
		{"completed at once", acpEv(t, 1, acp.ToolCall{ToolCallID: "t1", Title: "x", Status: done, Content: []acp.ToolCallContent{acp.TextContent("ok")}}),
			[]string{"tool-input-start call=t1 name=other title=x", `tool-output call=t1 text=ok output=[{"type":"content","content":{"type":"text","text":"ok"}}]`}},
		{"in progress says nothing", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusInProgress}), nil},
		{"progress with content", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TerminalContent("term")}}),
			[]string{`tool-output call=t1 output=[{"type":"terminal","terminalId":"term"}] preliminary`}},
		{"late input", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", RawInput: map[string]int{"n": 1}}),
			[]string{`tool-input call=t1 input={"n":1}`}},
		{"completed with raw output", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: done, RawOutput: []int{1}, Content: []acp.ToolCallContent{acp.TextContent("1")}}),
			[]string{`tool-output call=t1 text=1 output=[1]`}},
		{"completed bare", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: done}), []string{"tool-output call=t1 output=null"}},
		{"failed", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent("no such file")}}),
			[]string{"tool-error call=t1 text=no such file"}},
		{"failed bare", acpEv(t, 1, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusFailed}), []string{"tool-error call=t1 text=failed"}},
		{"plan", acpEv(t, 1, acp.Plan{Entries: []acp.PlanEntry{{Content: "x", Priority: "low", Status: "pending"}}}),
			[]string{`plan data={"entries":[{"content":"x","priority":"low","status":"pending"}]}`}},
		{"the old quick start's shape is data", ev(t, 1, "agent_message_chunk", map[string]string{"text": "Hel"}),
			[]string{`data data={"text":"Hel"} dname=agent_message_chunk`}},
		{"another kind is data", acpEv(t, 1, acp.Other{Kind: "usage_update", Raw: json.RawMessage(`{"sessionUpdate":"usage_update"}`)}),
			[]string{`data data={"sessionId":"s1","update":{"sessionUpdate":"usage_update"}} dname=usage_update`}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, r.want, decode(r.ev))
		})
	}
}

func TestAgentPoolShapesDecode(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		ev   eventbus.Event
		want []string
	}{
		{"text start", apEv(t, 1, agentpool.TextStart(0, "Hel")), []string{"text text=Hel"}},
		{"empty text start", apEv(t, 1, agentpool.TextStart(0, "")), nil},
		{"thinking delta", apEv(t, 1, agentpool.ThinkingDelta(0, "hm")), []string{"reasoning text=hm"}},
		{"text delta", apEv(t, 1, agentpool.TextDelta(0, "lo")), []string{"text text=lo"}},
		{"tool call part", apEv(t, 1, agentpool.ToolCallPartStart(1, "read_file", "tc1")), []string{"tool-input-start call=tc1 name=read_file"}},
		{"args delta", apEv(t, 1, agentpool.ToolCallDelta(1, `{"pa`, "tc1")), []string{`tool-input-delta call=tc1 text={"pa`}},
		{"object args", apEv(t, 1, agentpool.PartDelta{Delta: agentpool.Delta{Kind: agentpool.DeltaToolCall, ArgsDelta: map[string]int{"n": 1}, ToolCallID: "tc1"}}),
			[]string{`tool-input call=tc1 input={"n":1}`}},
		{"tool call start", apEv(t, 1, agentpool.ToolCallStart{ToolCallID: "tc1", ToolName: "ls", Title: "List", RawInput: map[string]string{"p": "."}}),
			[]string{"tool-input-start call=tc1 name=ls title=List", `tool-input call=tc1 name=ls title=List input={"p":"."}`}},
		{"progress", apEv(t, 1, agentpool.ToolCallProgress{ToolCallID: "tc1", Status: "in_progress", Items: []agentpool.Item{agentpool.TextItem("50%")}}),
			[]string{`tool-output call=tc1 text=50% output=[{"type":"text","text":"50%"}] preliminary`}},
		{"progress failed", apEv(t, 1, agentpool.ToolCallProgress{ToolCallID: "tc1", Status: "failed", Message: "denied"}),
			[]string{"tool-error call=tc1 text=denied"}},
		{"complete", apEv(t, 1, agentpool.ToolCallComplete{ToolCallID: "tc1", ToolName: "ls", ToolInput: map[string]string{"p": "."}, ToolResult: "a.go"}),
			[]string{`tool-input call=tc1 name=ls input={"p":"."}`, `tool-output call=tc1 text=a.go output="a.go"`}},
		{"plan", apEv(t, 1, agentpool.PlanUpdate{Entries: []agentpool.PlanEntry{{Content: "x", Priority: "high", Status: "pending"}}}),
			[]string{`plan data={"entries":[{"content":"x","priority":"high","status":"pending"}]}`}},
		{"run started", apEv(t, 1, agentpool.RunStarted{RunID: "r1"}), []string{"start turn=r1"}},
		{"stream complete", apEv(t, 1, agentpool.StreamComplete{}), []string{"finish reason=complete"}},
		{"stream cancelled", apEv(t, 1, agentpool.StreamComplete{Cancelled: true}), []string{"finish reason=cancelled"}},
		{"run error", apEv(t, 1, agentpool.RunError{Message: "boom", RunID: "r1"}), []string{"finish text=boom turn=r1 reason=error"}},
		{"run failed", ev(t, 1, "run_failed", map[string]string{"run_id": "r1", "session_id": "s1"}), []string{"finish text=run failed turn=r1 reason=error"}},
		{"custom is data", apEv(t, 1, agentpool.Other{Kind: "custom", Raw: json.RawMessage(`{"event_data":1}`)}),
			[]string{`data data={"event_data":1} dname=custom`}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, r.want, decode(r.ev))
		})
	}
}

func TestTurnsDecode(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"start turn=t1"}, decode(ev(t, 1, "turn_start", map[string]string{"turn": "t1", "session": "s1"})))
	assert.Equal(t, []string{"finish text=quota turn=t1 reason=error"},
		decode(ev(t, 1, "turn_end", map[string]string{"turn": "t1", "reason": "error", "message": "quota"})))
	assert.Equal(t, []string{"start turn=3"}, decode(ev(t, 1, "turn_start", map[string]any{"turn": 3, "sessionId": "demo"})),
		"the demo's numbered turns")
	assert.Equal(t, []string{"finish turn=3 reason=complete"}, decode(ev(t, 1, "turn_end", map[string]any{"turn": 3, "stopReason": "end_turn"})))
	assert.Equal(t, []string{"finish reason=cancelled"}, decode(ev(t, 1, "turn_end", map[string]any{"stopReason": "cancelled"})))
	assert.Equal(t, []string{`data data="x" dname=turn_end`}, decode(ev(t, 1, "turn_end", "x")))
}

// Nothing is dropped: byte payloads, bus frames and unknown types become
// Data parts carrying the id, session and payload.
func TestUnknownEventsPassAsData(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	blob, err := bus.PublishBytes("s1", "blob", "image/png", []byte{0, 1})
	require.NoError(t, err)
	parts := codec.Default.Decode(nil, blob)
	require.Len(t, parts, 1)
	assert.Equal(t, codec.Data, parts[0].Kind)
	assert.Equal(t, blob.ID, parts[0].ID)
	assert.JSONEq(t, `{"contentType":"image/png","base64":"AAE="}`, string(parts[0].Data))

	frame := eventbus.Event{Session: "s1", Type: "replay_complete"}
	parts = codec.Default.Decode(nil, frame)
	require.Len(t, parts, 1)
	assert.Equal(t, "replay_complete", parts[0].Name)
	assert.Equal(t, "null", string(parts[0].Data))
}

// An application's decoder, put first, overrides the built-in ones and
// adds its own types; the rest still decode as before.
func TestAppDecoderComesFirst(t *testing.T) {
	t.Parallel()
	mine := codec.DecoderFunc(func(dst []codec.Part, e eventbus.Event) ([]codec.Part, bool) {
		if e.Type != "log_line" {
			return dst, false
		}
		var l struct{ Line string }
		if json.Unmarshal(e.Data, &l) != nil {
			return dst, false
		}
		return append(dst, codec.Part{Kind: codec.Reasoning, ID: e.ID, Session: e.Session, Text: l.Line}), true
	})
	set := codec.New(mine, nil, codec.ACP)
	assert.Equal(t, "reasoning text=boot", short(set.Decode(nil, ev(t, 1, "log_line", map[string]string{"line": "boot"}))[0]))
	assert.Equal(t, "text text=hi", short(set.Decode(nil, acpEv(t, 2, acp.MessageChunk("hi")))[0]))
	assert.Equal(t, codec.Data, set.Decode(nil, apEv(t, 3, agentpool.TextDelta(0, "x")))[0].Kind, "not in this set: data")
}

// A compacted ACP reply decodes to one Text part with the whole text and
// the last id; resumed inside it, to the rest. So does an AgentPool reply.
func TestCompactedRecordsDecode(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name  string
		rules *coalesce.Set
		pub   func(bus *eventbus.Bus, s string) error
	}{
		{"acp", coalesce.ACP, func(bus *eventbus.Bus, s string) error {
			_, err := acp.Publish(bus, "s1", acp.MessageChunk(s))
			return err
		}},
		{"agentpool", coalesce.AgentPool, func(bus *eventbus.Bus, s string) error {
			_, err := agentpool.Publish(bus, "s1", agentpool.TextDelta(0, s))
			return err
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 4, ReplayCompact: r.rules})
			require.NoError(t, err)
			defer bus.Close()
			for _, s := range []string{"Hel", "lo, ", "wor", "ld"} {
				require.NoError(t, r.pub(bus, s))
			}
			read := func(cursor uint64) []codec.Part {
				sub, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
				require.NoError(t, err)
				defer sub.Close()
				var parts []codec.Part
				for {
					e, ok := sub.TryNext()
					require.True(t, ok)
					if e.ID == 0 {
						return parts
					}
					parts = codec.Default.Decode(parts, e)
				}
			}
			all := read(0)
			require.Len(t, all, 1)
			assert.Equal(t, codec.Text, all[0].Kind)
			assert.Equal(t, "Hello, world", all[0].Text)
			assert.EqualValues(t, 4, all[0].ID)
			assert.EqualValues(t, 1, all[0].First(), "the record's first event")
			rest := read(2)
			require.Len(t, rest, 1)
			assert.Equal(t, "world", rest[0].Text)
			assert.EqualValues(t, 3, rest[0].First())
		})
	}
}

func TestKindNames(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "tool-input-start", codec.ToolInputStart.String())
	assert.Equal(t, "finish", codec.Finish.String())
	assert.Equal(t, "Kind(0)", codec.Kind(0).String())
	assert.Equal(t, "Kind(99)", codec.Kind(99).String())
}
