package acp

import (
	"encoding/json"
)

// The sessionUpdate kinds this package types: each is the event type its
// update is published under.
const (
	TypeUserMessageChunk = "user_message_chunk"
	TypeMessageChunk     = "agent_message_chunk"
	TypeThoughtChunk     = "agent_thought_chunk"
	TypeToolCall         = "tool_call"
	TypeToolCallUpdate   = "tool_call_update"
	TypePlan             = "plan"
)

// Update is the "update" object of one session/update notification:
// [ContentChunk], [ToolCall], [ToolCallUpdate], [Plan], or [Other] for a
// kind this package does not type. Its JSON carries "sessionUpdate".
type Update interface {
	// Type returns the sessionUpdate kind, the event type on the bus.
	Type() string
	json.Marshaler
}

// Notification is the params of a session/update notification: the
// payload of an event of type Update.Type().
type Notification struct {
	// SessionID is the ACP session the update belongs to (the bus session
	// id, when the two are one).
	SessionID string `json:"sessionId"`
	// Update is the update; nil marshals as null.
	Update Update `json:"update"`
}

// Type returns the event type n is published under: n.Update's kind, ""
// when Update is nil.
func (n Notification) Type() string {
	if n.Update == nil {
		return ""
	}
	return n.Update.Type()
}

// ContentBlock is one item of content (the protocol's ContentBlock, which
// MCP shares): text, or an image, audio, resource link or embedded resource
// described by the other fields. Type "text" always carries "text".
type ContentBlock struct {
	// Type is "text", "image", "audio", "resource_link" or "resource".
	Type string `json:"type"`
	// Text is the text of a text block (Markdown).
	Text string `json:"text,omitempty"`
	// Data is the base64 data of an image or audio block.
	Data string `json:"data,omitempty"`
	// MimeType is the media type of an image, audio or linked resource.
	MimeType string `json:"mimeType,omitempty"`
	// URI and Name name a resource link.
	URI  string `json:"uri,omitempty"`
	Name string `json:"name,omitempty"`
	// Resource is an embedded resource's contents, as JSON.
	Resource json.RawMessage `json:"resource,omitempty"`
}

// Text returns a text content block.
func Text(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// MarshalJSON writes b, with "text" even when empty for a text block (the
// schema requires it).
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	type plain ContentBlock
	if b.Type != "text" || b.Text != "" {
		return json.Marshal(plain(b))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(b), ""})
}

// ContentChunk is a streamed piece of a message: agent_message_chunk (the
// reply), agent_thought_chunk (reasoning) or user_message_chunk.
type ContentChunk struct {
	// Kind is TypeMessageChunk, TypeThoughtChunk or TypeUserMessageChunk.
	Kind string `json:"-"`
	// Content is the piece; coalesce.ACP merges text pieces only.
	Content ContentBlock `json:"content"`
	// MessageID, when set, names the message the chunk belongs to; a new
	// id starts a new message.
	MessageID string `json:"messageId,omitempty"`
}

// MessageChunk returns a piece of the agent's reply.
func MessageChunk(text string) ContentChunk {
	return ContentChunk{Kind: TypeMessageChunk, Content: Text(text)}
}

// ThoughtChunk returns a piece of the agent's reasoning.
func ThoughtChunk(text string) ContentChunk {
	return ContentChunk{Kind: TypeThoughtChunk, Content: Text(text)}
}

// UserMessageChunk returns a piece of the user's message (as an agent
// replays a loaded session).
func UserMessageChunk(text string) ContentChunk {
	return ContentChunk{Kind: TypeUserMessageChunk, Content: Text(text)}
}

// Type returns c.Kind.
func (c ContentChunk) Type() string { return c.Kind }

// MarshalJSON writes {"sessionUpdate": Kind, "content", "messageId"?}.
func (c ContentChunk) MarshalJSON() ([]byte, error) {
	type plain ContentChunk
	return json.Marshal(struct {
		SessionUpdate string `json:"sessionUpdate"`
		plain
	}{c.Kind, plain(c)})
}

// ToolKind is a tool call's category ("read", "edit", "delete", "move",
// "search", "execute", "think", "fetch", "switch_mode", "other"); clients
// choose icons by it. Empty means "other".
type ToolKind = string

// ToolCallStatus is a tool call's state: "pending", "in_progress",
// "completed" or "failed". Empty means "pending" in a [ToolCall] and
// "unchanged" in a [ToolCallUpdate].
type ToolCallStatus = string

// The tool call statuses.
const (
	StatusPending    ToolCallStatus = "pending"
	StatusInProgress ToolCallStatus = "in_progress"
	StatusCompleted  ToolCallStatus = "completed"
	StatusFailed     ToolCallStatus = "failed"
)

// ToolCallContent is one item of a tool call's content: "content" (a
// [ContentBlock]), "diff" (a file change) or "terminal" (an embedded
// terminal). Build it with [TextContent], [DiffContent] or
// [TerminalContent].
type ToolCallContent struct {
	// Type is "content", "diff" or "terminal".
	Type string `json:"type"`
	// Content is a "content" item's block.
	Content *ContentBlock `json:"content,omitempty"`
	// Path, OldText (nil for a new file) and NewText describe a "diff".
	Path    string  `json:"path,omitempty"`
	OldText *string `json:"oldText,omitempty"`
	NewText string  `json:"newText,omitempty"`
	// TerminalID names a "terminal".
	TerminalID string `json:"terminalId,omitempty"`
}

// TextContent returns a "content" item holding text.
func TextContent(s string) ToolCallContent {
	b := Text(s)
	return ToolCallContent{Type: "content", Content: &b}
}

// DiffContent returns a "diff" item: the file at path changed from
// oldText to newText (oldText nil: a new file).
func DiffContent(path string, oldText *string, newText string) ToolCallContent {
	return ToolCallContent{Type: "diff", Path: path, OldText: oldText, NewText: newText}
}

// TerminalContent returns a "terminal" item embedding the terminal id.
func TerminalContent(id string) ToolCallContent {
	return ToolCallContent{Type: "terminal", TerminalID: id}
}

// MarshalJSON writes c with the members its type requires ("newText" of a
// diff even when empty).
func (c ToolCallContent) MarshalJSON() ([]byte, error) {
	type plain ToolCallContent
	if c.Type != "diff" || c.NewText != "" {
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		plain
		NewText string `json:"newText"`
	}{plain(c), ""})
}

// Location is a file location a tool call touches ("follow-along").
type Location struct {
	Path string `json:"path"`
	// Line is 1-based; nil leaves it out.
	Line *int `json:"line,omitempty"`
}

// ToolCall announces a tool call (sessionUpdate tool_call).
type ToolCall struct {
	// ToolCallID identifies the call within the session; required.
	ToolCallID string `json:"toolCallId"`
	// Title says what the tool is doing, for people; required.
	Title string `json:"title"`
	// Kind is the tool's category; empty means "other".
	Kind ToolKind `json:"kind,omitempty"`
	// Status is the call's state; empty means "pending".
	Status ToolCallStatus `json:"status,omitempty"`
	// Content is what the call produced so far.
	Content []ToolCallContent `json:"content,omitempty"`
	// Locations are the files it touches.
	Locations []Location `json:"locations,omitempty"`
	// RawInput is the tool's input, any JSON-encodable value (as [Parse]
	// returns it: a json.RawMessage); nil leaves it out.
	RawInput any `json:"rawInput,omitempty"`
	// RawOutput is the tool's output, as RawInput.
	RawOutput any `json:"rawOutput,omitempty"`
}

// Type returns TypeToolCall.
func (ToolCall) Type() string { return TypeToolCall }

// MarshalJSON writes {"sessionUpdate":"tool_call", …}.
func (t ToolCall) MarshalJSON() ([]byte, error) {
	type plain ToolCall
	return json.Marshal(struct {
		SessionUpdate string `json:"sessionUpdate"`
		plain
	}{TypeToolCall, plain(t)})
}

// ToolCallUpdate reports progress or results of a tool call (sessionUpdate
// tool_call_update): only the fields that changed are set, the rest left
// empty (omitted).
type ToolCallUpdate struct {
	// ToolCallID names the call; required.
	ToolCallID string `json:"toolCallId"`
	// Status is the new state.
	Status ToolCallStatus `json:"status,omitempty"`
	// Title, Kind: new values.
	Title string   `json:"title,omitempty"`
	Kind  ToolKind `json:"kind,omitempty"`
	// Content replaces the call's content (coalesce.ACP concatenates the
	// content of consecutive updates of one call and status).
	Content []ToolCallContent `json:"content,omitempty"`
	// Locations replaces the call's locations.
	Locations []Location `json:"locations,omitempty"`
	// RawInput and RawOutput: new values, as in [ToolCall].
	RawInput  any `json:"rawInput,omitempty"`
	RawOutput any `json:"rawOutput,omitempty"`
}

// Type returns TypeToolCallUpdate.
func (ToolCallUpdate) Type() string { return TypeToolCallUpdate }

// MarshalJSON writes {"sessionUpdate":"tool_call_update", …}.
func (t ToolCallUpdate) MarshalJSON() ([]byte, error) {
	type plain ToolCallUpdate
	return json.Marshal(struct {
		SessionUpdate string `json:"sessionUpdate"`
		plain
	}{TypeToolCallUpdate, plain(t)})
}

// PlanEntry is one task of a plan.
type PlanEntry struct {
	// Content says what the task is.
	Content string `json:"content"`
	// Priority is "high", "medium" or "low".
	Priority string `json:"priority"`
	// Status is "pending", "in_progress" or "completed".
	Status string `json:"status"`
}

// Plan is the agent's whole plan (sessionUpdate plan): every update
// carries every entry, and a client replaces the plan it shows.
type Plan struct {
	Entries []PlanEntry `json:"entries"`
}

// Type returns TypePlan.
func (Plan) Type() string { return TypePlan }

// MarshalJSON writes {"sessionUpdate":"plan","entries":[…]} (an empty
// plan as "entries":[]).
func (p Plan) MarshalJSON() ([]byte, error) {
	entries := p.Entries
	if entries == nil {
		entries = []PlanEntry{}
	}
	return json.Marshal(struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Entries       []PlanEntry `json:"entries"`
	}{TypePlan, entries})
}

// Other is an update of a kind this package does not type
// (available_commands_update, current_mode_update, usage_update, …), kept
// as its JSON.
type Other struct {
	// Kind is its sessionUpdate.
	Kind string
	// Raw is the whole update object, sessionUpdate included.
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
