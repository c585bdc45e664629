package codec

import (
	"encoding/json"
	"strings"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
)

// ACP decodes the Agent Client Protocol's session/update shapes (package
// acp; a compacted or merged record alike):
//
//	agent_message_chunk, text       Text
//	agent_thought_chunk, text       Reasoning
//	tool_call                       ToolInputStart (ToolName: the tool kind, "other" when unset);
//	                                ToolInput when it has rawInput; ToolOutput when completed;
//	                                ToolError when failed
//	tool_call_update                ToolInput when it has rawInput; completed: ToolOutput
//	                                (rawOutput, else the content array); failed: ToolError;
//	                                another status with content or rawOutput: a preliminary
//	                                ToolOutput; nothing else: no part
//	plan                            Plan
//
// Any other kind, a chunk that is not text and a payload of another shape
// are not known (a [Set] passes them on as Data).
var ACP Decoder = DecoderFunc(decodeACP)

func decodeACP(dst []Part, ev eventbus.Event) ([]Part, bool) {
	switch ev.Type {
	case acp.TypeMessageChunk, acp.TypeThoughtChunk, acp.TypeToolCall, acp.TypeToolCallUpdate, acp.TypePlan:
	default:
		return dst, false
	}
	if !ev.IsJSON() {
		return dst, false
	}
	if ev.Type == acp.TypeMessageChunk || ev.Type == acp.TypeThoughtChunk {
		return decodeChunk(dst, ev)
	}
	n, err := acp.Parse(ev.Data)
	if err != nil || n.Type() != ev.Type {
		return dst, false
	}
	switch u := n.Update.(type) {
	case acp.ToolCall:
		p := part(ToolInputStart, ev)
		p.ToolCallID, p.ToolName, p.Title = u.ToolCallID, toolName(u.Kind), u.Title
		dst = append(dst, p)
		if u.RawInput != nil {
			in := p
			in.Kind, in.Input = ToolInput, rawJSON(u.RawInput)
			dst = append(dst, in)
		}
		return acpResult(dst, ev, u.ToolCallID, u.Status, u.Content, u.RawOutput), true
	case acp.ToolCallUpdate:
		if u.RawInput != nil {
			in := part(ToolInput, ev)
			// An update restates the kind only when it changes: no name.
			in.ToolCallID, in.ToolName, in.Title, in.Input = u.ToolCallID, u.Kind, u.Title, rawJSON(u.RawInput)
			dst = append(dst, in)
		}
		return acpResult(dst, ev, u.ToolCallID, u.Status, u.Content, u.RawOutput), true
	case acp.Plan:
		p := part(Plan, ev)
		p.Data, _ = json.Marshal(struct {
			Entries []acp.PlanEntry `json:"entries"`
		}{append([]acp.PlanEntry{}, u.Entries...)})
		return append(dst, p), true
	}
	return dst, false
}

// decodeChunk decodes a text chunk in one pass (the stream's hot path),
// as acp.Parse would read it.
func decodeChunk(dst []Part, ev eventbus.Event) ([]Part, bool) {
	var n struct {
		Update *struct {
			Kind    *string `json:"sessionUpdate"`
			Content *struct {
				Type string          `json:"type"`
				Text json.RawMessage `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(ev.Data, &n) != nil || n.Update == nil || n.Update.Kind == nil || *n.Update.Kind != ev.Type ||
		n.Update.Content == nil || n.Update.Content.Type != "text" {
		return dst, false
	}
	text := ""
	if lit := n.Update.Content.Text; len(lit) > 0 && lit[0] == '"' {
		var ok bool
		if text, ok = unquote(lit); !ok { // half a surrogate pair kept (TextJoin)
			return dst, false
		}
	} else if len(lit) > 0 && string(lit) != "null" {
		return dst, false // not a string: acp.Parse refuses it too
	}
	k := Text
	if ev.Type == acp.TypeThoughtChunk {
		k = Reasoning
	}
	p := part(k, ev)
	p.Text = text
	return append(dst, p), true
}

// acpResult appends what a tool call's status, content and rawOutput say
// about its result.
func acpResult(dst []Part, ev eventbus.Event, id, status string, content []acp.ToolCallContent, rawOutput any) []Part {
	text := contentText(content)
	switch {
	case status == acp.StatusFailed:
		p := part(ToolError, ev)
		p.ToolCallID, p.Text = id, text
		if p.Text == "" {
			p.Text = "failed"
		}
		return append(dst, p)
	case status == acp.StatusCompleted || content != nil || rawOutput != nil:
		p := part(ToolOutput, ev)
		p.ToolCallID, p.Text, p.Preliminary = id, text, status != acp.StatusCompleted
		switch {
		case rawOutput != nil:
			p.Output = rawJSON(rawOutput)
		case content != nil:
			p.Output, _ = json.Marshal(content)
		default:
			p.Output = json.RawMessage("null")
		}
		return append(dst, p)
	}
	return dst
}

// contentText joins the text of a tool call's text content blocks.
func contentText(content []acp.ToolCallContent) string {
	var b strings.Builder
	for _, c := range content {
		if c.Type == "content" && c.Content != nil && c.Content.Type == "text" {
			b.WriteString(c.Content.Text)
		}
	}
	return b.String()
}

// toolName is the name a tool call of ACP kind k shows under: the kind.
func toolName(k string) string {
	if k == "" {
		return "other"
	}
	return k
}

// rawJSON returns v, a json.RawMessage from acp.Parse or agentpool.Parse,
// as JSON.
func rawJSON(v any) json.RawMessage {
	if r, ok := v.(json.RawMessage); ok {
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
