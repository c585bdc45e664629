package codec

import (
	"encoding/json"
	"strings"

	"github.com/replaybus/replaybus/agentpool"
	"github.com/replaybus/replaybus/eventbus"
)

// AgentPool decodes AgentPool's shapes (package agentpool; a merged or
// compacted record alike):
//
//	part_start text / thinking      Text / Reasoning with its first text (none when empty)
//	part_start tool-call            ToolInputStart; ToolInputDelta with args text so far,
//	                                ToolInput when args is an object
//	part_delta text / thinking      Text / Reasoning
//	part_delta tool_call            ToolInputDelta (a string args_delta), ToolInput (an object)
//	tool_call_start                 ToolInputStart, ToolInput (raw_input)
//	tool_call_progress              completed: ToolOutput (the items); failed: ToolError;
//	                                another status with items: a preliminary ToolOutput
//	tool_call_complete              ToolInput (tool_input), ToolOutput (tool_result)
//	plan_update                     Plan
//	run_started                     Start (Turn: run_id)
//	stream_complete                 Finish: cancelled when it says so, else complete
//	run_error, run_failed           Finish: error, with the message
//
// Any other kind, and a payload of another shape, are not known.
var AgentPool Decoder = DecoderFunc(decodeAgentPool)

func decodeAgentPool(dst []Part, ev eventbus.Event) ([]Part, bool) {
	if !ev.IsJSON() {
		return dst, false
	}
	if ev.Type == "run_failed" {
		var f struct {
			RunID string `json:"run_id"`
		}
		if json.Unmarshal(ev.Data, &f) != nil {
			return dst, false
		}
		p := part(Finish, ev)
		p.Turn, p.Reason, p.Text = f.RunID, ReasonError, "run failed"
		return append(dst, p), true
	}
	e, err := agentpool.Parse(ev.Type, ev.Data)
	if err != nil {
		return dst, false
	}
	switch e := e.(type) {
	case agentpool.PartStart:
		switch e.Part.Kind {
		case agentpool.PartText, agentpool.PartThinking:
			if e.Part.Content == "" {
				return dst, true
			}
			return append(dst, textPart(ev, e.Part.Kind == agentpool.PartThinking, e.Part.Content)), true
		case agentpool.PartToolCall:
			p := part(ToolInputStart, ev)
			p.ToolCallID, p.ToolName = e.Part.ToolCallID, e.Part.ToolName
			return args(append(dst, p), ev, e.Part.ToolCallID, e.Part.ToolName, e.Part.Args), true
		}
	case agentpool.PartDelta:
		switch e.Delta.Kind {
		case agentpool.DeltaText, agentpool.DeltaThinking:
			return append(dst, textPart(ev, e.Delta.Kind == agentpool.DeltaThinking, e.Delta.ContentDelta)), true
		case agentpool.DeltaToolCall:
			return args(dst, ev, e.Delta.ToolCallID, "", e.Delta.ArgsDelta), true
		}
	case agentpool.ToolCallStart:
		p := part(ToolInputStart, ev)
		p.ToolCallID, p.ToolName, p.Title = e.ToolCallID, e.ToolName, e.Title
		in := p
		in.Kind, in.Input = ToolInput, rawJSON(e.RawInput)
		if e.RawInput == nil {
			in.Input = json.RawMessage("{}")
		}
		return append(dst, p, in), true
	case agentpool.ToolCallProgress:
		text := itemsText(e.Items)
		switch {
		case e.Status == "failed":
			p := part(ToolError, ev)
			p.ToolCallID, p.Text = e.ToolCallID, firstOf(e.Message, text, "failed")
			return append(dst, p), true
		case e.Status == "completed" || len(e.Items) > 0:
			p := part(ToolOutput, ev)
			p.ToolCallID, p.Text, p.Preliminary = e.ToolCallID, text, e.Status != "completed"
			p.Output, _ = json.Marshal(append([]agentpool.Item{}, e.Items...))
			return append(dst, p), true
		}
		return dst, true
	case agentpool.ToolCallComplete:
		in := part(ToolInput, ev)
		in.ToolCallID, in.ToolName, in.Input = e.ToolCallID, e.ToolName, rawJSON(e.ToolInput)
		out := part(ToolOutput, ev)
		out.ToolCallID, out.Output = e.ToolCallID, rawJSON(e.ToolResult)
		if s, ok := e.ToolResult.(json.RawMessage); ok {
			_ = json.Unmarshal(s, &out.Text) // a string result is its own text
		}
		return append(dst, in, out), true
	case agentpool.PlanUpdate:
		p := part(Plan, ev)
		p.Data, _ = json.Marshal(struct {
			Entries []agentpool.PlanEntry `json:"entries"`
		}{append([]agentpool.PlanEntry{}, e.Entries...)})
		return append(dst, p), true
	case agentpool.RunStarted:
		p := part(Start, ev)
		p.Turn = e.RunID
		return append(dst, p), true
	case agentpool.StreamComplete:
		p := part(Finish, ev)
		p.Reason = ReasonComplete
		if e.Cancelled {
			p.Reason = ReasonCancelled
		}
		return append(dst, p), true
	case agentpool.RunError:
		p := part(Finish, ev)
		p.Turn, p.Reason, p.Text = e.RunID, ReasonError, firstOf(e.Message, "run error")
		return append(dst, p), true
	}
	return dst, false
}

// textPart returns a Text (or, thinking, Reasoning) part holding s.
func textPart(ev eventbus.Event, thinking bool, s string) Part {
	p := part(Text, ev)
	if thinking {
		p.Kind = Reasoning
	}
	p.Text = s
	return p
}

// args appends the parts of tool-call arguments a: a JSON text fragment
// (a string) as a ToolInputDelta, an object as a ToolInput.
func args(dst []Part, ev eventbus.Event, id, name string, a any) []Part {
	r, ok := a.(json.RawMessage)
	if !ok || len(r) == 0 {
		return dst
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		if s == "" {
			return dst
		}
		p := part(ToolInputDelta, ev)
		p.ToolCallID, p.Text = id, s
		return append(dst, p)
	}
	p := part(ToolInput, ev)
	p.ToolCallID, p.ToolName, p.Input = id, name, r
	return append(dst, p)
}

// itemsText joins the text of text items.
func itemsText(items []agentpool.Item) string {
	var b strings.Builder
	for _, it := range items {
		if it.Type == "text" {
			b.WriteString(it.Text)
		}
	}
	return b.String()
}

// firstOf returns the first non-empty string.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
