package agentpool

import (
	"encoding/json"

	"github.com/replaybus/replaybus/coalesce"
)

// The event kinds this package types: each is the event type its value is
// published under. The three that coalesce.AgentPool merges are its own
// constants.
const (
	TypePartStart        = "part_start"
	TypePartDelta        = coalesce.TypePartDelta
	TypeToolCallStart    = "tool_call_start"
	TypeToolCallProgress = coalesce.TypeToolCallProgress
	TypeToolCallComplete = "tool_call_complete"
	TypePlanUpdate       = coalesce.TypePlanUpdate
	TypeRunStarted       = "run_started"
	TypeRunError         = "run_error"
	TypeStreamComplete   = "stream_complete"
)

// Event is one AgentPool event: the types of this package, or [Other].
// Its JSON carries "event_kind".
type Event interface {
	// Type returns the event_kind, the event type on the bus.
	Type() string
	json.Marshaler
}

// The delta kinds of a part_delta (pydantic-ai's part_delta_kind).
const (
	DeltaText     = "text"
	DeltaThinking = "thinking"
	DeltaToolCall = "tool_call"
)

// Delta is the delta of a [PartDelta].
type Delta struct {
	// Kind is DeltaText, DeltaThinking or DeltaToolCall.
	Kind string `json:"part_delta_kind"`
	// ContentDelta is the piece of text or thinking.
	ContentDelta string `json:"content_delta,omitempty"`
	// ArgsDelta is the piece of a tool call's arguments: a JSON text
	// fragment (a string), or a whole object (which coalesce.AgentPool
	// does not merge).
	ArgsDelta any `json:"args_delta,omitempty"`
	// ToolCallID names the tool call a DeltaToolCall belongs to.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// PartDelta is a piece of a model response's part (pydantic-ai's
// PartDeltaEvent): text, thinking or tool-call arguments.
type PartDelta struct {
	// Index is the part's position in the response.
	Index int `json:"index"`
	// Delta is the piece.
	Delta Delta `json:"delta"`
	// SessionID and MessageID, when set, name where it belongs.
	SessionID string `json:"session_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// TextDelta returns a piece of the reply's text part at index.
func TextDelta(index int, text string) PartDelta {
	return PartDelta{Index: index, Delta: Delta{Kind: DeltaText, ContentDelta: text}}
}

// ThinkingDelta returns a piece of a thinking part at index.
func ThinkingDelta(index int, text string) PartDelta {
	return PartDelta{Index: index, Delta: Delta{Kind: DeltaThinking, ContentDelta: text}}
}

// ToolCallDelta returns a piece (JSON text) of the arguments of tool call
// id, the part at index.
func ToolCallDelta(index int, args, id string) PartDelta {
	return PartDelta{Index: index, Delta: Delta{Kind: DeltaToolCall, ArgsDelta: args, ToolCallID: id}}
}

// Type returns TypePartDelta.
func (PartDelta) Type() string { return TypePartDelta }

// MarshalJSON writes d with "event_kind":"part_delta"; a text or thinking
// delta always carries content_delta.
func (d PartDelta) MarshalJSON() ([]byte, error) {
	type plain PartDelta
	p := struct {
		plain
		Delta any    `json:"delta"`
		Kind  string `json:"event_kind"`
	}{plain: plain(d), Delta: d.Delta, Kind: TypePartDelta}
	if d.Delta.Kind == DeltaText || d.Delta.Kind == DeltaThinking {
		type plainDelta Delta
		p.Delta = struct {
			plainDelta
			ContentDelta string `json:"content_delta"`
		}{plainDelta(d.Delta), d.Delta.ContentDelta}
	}
	return json.Marshal(p)
}
