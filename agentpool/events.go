package agentpool

import "encoding/json"

// The part kinds of a part_start (pydantic-ai's part_kind).
const (
	PartText     = "text"
	PartThinking = "thinking"
	PartToolCall = "tool-call"
)

// Part is the part a [PartStart] opens.
type Part struct {
	// Kind is PartText, PartThinking or PartToolCall.
	Kind string `json:"part_kind"`
	// Content is a text or thinking part's first text.
	Content string `json:"content,omitempty"`
	// ToolName, ToolCallID and Args describe a tool-call part; Args is its
	// arguments so far (JSON text or an object).
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	Args       any    `json:"args,omitempty"`
}

// PartStart opens a part of a model response (pydantic-ai's
// PartStartEvent); a text part's Content is the reply's first text.
type PartStart struct {
	Index     int    `json:"index"`
	Part      Part   `json:"part"`
	SessionID string `json:"session_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// TextStart returns the start of a text part at index with its first text.
func TextStart(index int, text string) PartStart {
	return PartStart{Index: index, Part: Part{Kind: PartText, Content: text}}
}

// ThinkingStart returns the start of a thinking part at index.
func ThinkingStart(index int, text string) PartStart {
	return PartStart{Index: index, Part: Part{Kind: PartThinking, Content: text}}
}

// ToolCallPartStart returns the start of a tool-call part at index: the
// model calls tool name as call id (its arguments follow as ToolCallDelta).
func ToolCallPartStart(index int, name, id string) PartStart {
	return PartStart{Index: index, Part: Part{Kind: PartToolCall, ToolName: name, ToolCallID: id}}
}

// Type returns TypePartStart.
func (PartStart) Type() string { return TypePartStart }

// MarshalJSON writes s with "event_kind":"part_start"; a text or thinking
// part always carries content.
func (s PartStart) MarshalJSON() ([]byte, error) {
	type plain PartStart
	p := struct {
		plain
		Part any    `json:"part"`
		Kind string `json:"event_kind"`
	}{plain: plain(s), Part: s.Part, Kind: TypePartStart}
	if s.Part.Kind == PartText || s.Part.Kind == PartThinking {
		type plainPart Part
		p.Part = struct {
			plainPart
			Content string `json:"content"`
		}{plainPart(s.Part), s.Part.Content}
	}
	return json.Marshal(p)
}

// Item is one content item of a tool call ("text", "terminal", "diff",
// "location" or "file"), as AgentPool's ToolCallContentItem.
type Item struct {
	Type       string  `json:"type"`
	Text       string  `json:"text,omitempty"`
	TerminalID string  `json:"terminal_id,omitempty"`
	Path       string  `json:"path,omitempty"`
	OldText    *string `json:"old_text,omitempty"`
	NewText    string  `json:"new_text,omitempty"`
	Line       *int    `json:"line,omitempty"`
	Content    string  `json:"content,omitempty"`
	Language   string  `json:"language,omitempty"`
}

// TextItem returns a "text" item.
func TextItem(s string) Item { return Item{Type: "text", Text: s} }

// ToolCallStart says a tool call began, with its input (AgentPool's
// ToolCallStartEvent).
type ToolCallStart struct {
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	// Title says what it does, for people.
	Title string `json:"title"`
	// Kind is the ACP tool kind ("read", "execute", …; "other").
	Kind string `json:"kind,omitempty"`
	// RawInput is the tool's input, any JSON-encodable value (as [Parse]
	// returns it: a json.RawMessage).
	RawInput  any    `json:"raw_input,omitempty"`
	Content   []Item `json:"content,omitempty"`
	Locations []Item `json:"locations,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// Type returns TypeToolCallStart.
func (ToolCallStart) Type() string { return TypeToolCallStart }

// MarshalJSON writes t with "event_kind":"tool_call_start".
func (t ToolCallStart) MarshalJSON() ([]byte, error) {
	type plain ToolCallStart
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(t), TypeToolCallStart})
}

// ToolCallProgress reports a running tool call (AgentPool's
// ToolCallProgressEvent): its status and content items.
type ToolCallProgress struct {
	ToolCallID string `json:"tool_call_id"`
	// Status is "pending", "in_progress", "completed" or "failed".
	Status string `json:"status"`
	Title  string `json:"title,omitempty"`
	// Items are content items; they add to what the call showed, or
	// replace it when ReplaceContent is set.
	Items          []Item `json:"items"`
	ReplaceContent bool   `json:"replace_content,omitempty"`
	Message        string `json:"message,omitempty"`
	ToolName       string `json:"tool_name,omitempty"`
	SessionID      string `json:"session_id,omitempty"`
}

// Type returns TypeToolCallProgress.
func (ToolCallProgress) Type() string { return TypeToolCallProgress }

// MarshalJSON writes p with "event_kind":"tool_call_progress" (no items as
// "items":[]).
func (p ToolCallProgress) MarshalJSON() ([]byte, error) {
	type plain ToolCallProgress
	if p.Items == nil {
		p.Items = []Item{}
	}
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(p), TypeToolCallProgress})
}

// ToolCallComplete says a tool call finished, with its input and result
// (AgentPool's ToolCallCompleteEvent).
type ToolCallComplete struct {
	ToolName   string `json:"tool_name"`
	ToolCallID string `json:"tool_call_id"`
	// ToolInput and ToolResult: any JSON-encodable values (json.RawMessage
	// from [Parse]); a nil one is written as null.
	ToolInput  any    `json:"tool_input"`
	ToolResult any    `json:"tool_result"`
	AgentName  string `json:"agent_name"`
	MessageID  string `json:"message_id"`
	SessionID  string `json:"session_id,omitempty"`
}

// Type returns TypeToolCallComplete.
func (ToolCallComplete) Type() string { return TypeToolCallComplete }

// MarshalJSON writes c with "event_kind":"tool_call_complete".
func (c ToolCallComplete) MarshalJSON() ([]byte, error) {
	type plain ToolCallComplete
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(c), TypeToolCallComplete})
}

// PlanEntry is one task of a plan.
type PlanEntry struct {
	Content string `json:"content"`
	// Priority is "high", "medium" or "low".
	Priority string `json:"priority"`
	// Status is "pending", "in_progress" or "completed".
	Status string `json:"status"`
}

// PlanUpdate is the whole plan, re-sent on every change (AgentPool's
// PlanUpdateEvent).
type PlanUpdate struct {
	Entries    []PlanEntry `json:"entries"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
}

// Type returns TypePlanUpdate.
func (PlanUpdate) Type() string { return TypePlanUpdate }

// MarshalJSON writes p with "event_kind":"plan_update" (no entries as
// "entries":[]).
func (p PlanUpdate) MarshalJSON() ([]byte, error) {
	type plain PlanUpdate
	if p.Entries == nil {
		p.Entries = []PlanEntry{}
	}
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(p), TypePlanUpdate})
}

// RunStarted opens an agent run (AgentPool's RunStartedEvent).
type RunStarted struct {
	SessionID       string `json:"session_id"`
	RunID           string `json:"run_id"`
	AgentName       string `json:"agent_name,omitempty"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
}

// Type returns TypeRunStarted.
func (RunStarted) Type() string { return TypeRunStarted }

// MarshalJSON writes r with "event_kind":"run_started".
func (r RunStarted) MarshalJSON() ([]byte, error) {
	type plain RunStarted
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(r), TypeRunStarted})
}

// RunError says the run failed (AgentPool's RunErrorEvent).
type RunError struct {
	Message   string `json:"message"`
	Code      string `json:"code,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	AgentName string `json:"agent_name,omitempty"`
}

// Type returns TypeRunError.
func (RunError) Type() string { return TypeRunError }

// MarshalJSON writes r with "event_kind":"run_error".
func (r RunError) MarshalJSON() ([]byte, error) {
	type plain RunError
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(r), TypeRunError})
}

// StreamComplete ends a response (AgentPool's StreamCompleteEvent):
// Message is the final chat message as AgentPool serialises it (any
// JSON-encodable value; json.RawMessage from [Parse]), Cancelled whether
// the run was stopped before it completed.
type StreamComplete struct {
	Message   any    `json:"message"`
	Cancelled bool   `json:"cancelled"`
	SessionID string `json:"session_id,omitempty"`
}

// Type returns TypeStreamComplete.
func (StreamComplete) Type() string { return TypeStreamComplete }

// MarshalJSON writes s with "event_kind":"stream_complete".
func (s StreamComplete) MarshalJSON() ([]byte, error) {
	type plain StreamComplete
	return json.Marshal(struct {
		plain
		Kind string `json:"event_kind"`
	}{plain(s), TypeStreamComplete})
}

// Other is an event of a kind this package does not type, kept as its
// JSON.
type Other struct {
	// Kind is its event type.
	Kind string
	// Raw is its payload.
	Raw json.RawMessage
}

// Type returns o.Kind.
func (o Other) Type() string { return o.Kind }

// MarshalJSON returns o.Raw ("null" when empty).
func (o Other) MarshalJSON() ([]byte, error) {
	if len(o.Raw) == 0 {
		return []byte("null"), nil
	}
	return o.Raw, nil
}
