package aisdk

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
)

// The stream's protocol header: HeaderStream: StreamVersion on every
// UI-message stream response.
const (
	HeaderStream  = "X-Vercel-Ai-Ui-Message-Stream"
	StreamVersion = "v1"
)

// SetHeaders sets the headers of a UI-message stream response on h:
// text/event-stream, no caching or proxy buffering, and the protocol
// header.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set(HeaderStream, StreamVersion)
}

// The finish reasons of the finish chunk.
const (
	FinishStop  = "stop"
	FinishError = "error"
)

// Encoder writes one message's UI-message stream. The zero value is not
// usable: call [NewEncoder]. Not safe for concurrent use.
type Encoder struct {
	messageID string
	started   bool
	done      bool
	text      block // the open text block, if any
	reasoning block
	tools     map[string]*toolCall
}

// block is an open text or reasoning block.
type block struct {
	id      string // "" when none is open
	session string
	join    codec.TextJoin // pairs the halves of a surrogate pair two deltas split
}

// toolCall is what the stream said about one tool call.
type toolCall struct {
	name, title string
	started     bool // tool-input-start written
	known       bool // the client has a part for it (start or input written)
	input       bool // tool-input-available written: its input is whole
	output      bool // tool-output-available or -error written
}

// NewEncoder returns an Encoder for the message messageID (the start
// chunk's messageId; "" leaves it to the client).
func NewEncoder(messageID string) *Encoder {
	return &Encoder{messageID: messageID, tools: map[string]*toolCall{}}
}

// Done reports whether the stream has ended (Finish was written).
func (e *Encoder) Done() bool { return e.done }

// Start appends the start chunk, once; Append and Finish start the stream
// themselves when it has not started.
func (e *Encoder) Start(dst []byte) []byte {
	if e.started || e.done {
		return dst
	}
	e.started = true
	return chunk(dst, struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId,omitempty"`
	}{"start", e.messageID})
}

// Append appends the chunks of parts, in order: a Start part starts the
// stream, a Finish part ends it (see [Encoder.Finish]); after the end
// nothing more is written.
func (e *Encoder) Append(dst []byte, parts ...codec.Part) []byte {
	for _, p := range parts {
		if e.done {
			return dst
		}
		dst = e.part(e.Start(dst), p)
	}
	return dst
}

func (e *Encoder) part(dst []byte, p codec.Part) []byte {
	switch p.Kind {
	case codec.Text:
		return e.delta(dst, &e.text, &e.reasoning, "text", p)
	case codec.Reasoning:
		return e.delta(dst, &e.reasoning, &e.text, "reasoning", p)
	case codec.Start:
		return dst
	case codec.Finish:
		return e.Finish(dst, p.Reason, p.Text)
	}
	dst = e.closeBlocks(dst)
	switch p.Kind {
	case codec.ToolInputStart:
		t := e.tool(p)
		if t.known {
			return dst
		}
		t.started, t.known = true, true
		return e.inputStart(dst, p.ToolCallID, t)
	case codec.ToolInputDelta:
		t := e.tool(p)
		if t.input || t.output {
			// The client would take the call back to input-streaming and
			// drop its output: passed on as data, as AG-UI passes it.
			return data(dst, "data-tool-input-delta", "", mustJSON(map[string]string{"toolCallId": p.ToolCallID, "delta": p.Text}))
		}
		if !t.started {
			if t.known { // its input is already whole
				return dst
			}
			t.started, t.known = true, true
			dst = e.inputStart(dst, p.ToolCallID, t)
		}
		return chunk(dst, struct {
			Type           string `json:"type"`
			ToolCallID     string `json:"toolCallId"`
			InputTextDelta string `json:"inputTextDelta"`
		}{"tool-input-delta", p.ToolCallID, p.Text})
	case codec.ToolInput:
		t := e.tool(p)
		if t.output {
			// tool-input-available would take the call back to
			// input-available and drop its output.
			return data(dst, "data-tool-input", "", mustJSON(struct {
				ToolCallID string          `json:"toolCallId"`
				Input      json.RawMessage `json:"input"`
			}{p.ToolCallID, orNull(p.Input)}))
		}
		t.known = true
		return e.inputAvailable(dst, p.ToolCallID, t, p.Input)
	case codec.ToolOutput, codec.ToolError:
		t := e.tool(p)
		if !t.known {
			t.known = true
			dst = e.inputAvailable(dst, p.ToolCallID, t, nil)
		}
		t.output = true
		if p.Kind == codec.ToolError {
			return chunk(dst, struct {
				Type       string `json:"type"`
				ToolCallID string `json:"toolCallId"`
				ErrorText  string `json:"errorText"`
				Dynamic    bool   `json:"dynamic"`
			}{"tool-output-error", p.ToolCallID, p.Text, true})
		}
		return chunk(dst, struct {
			Type        string          `json:"type"`
			ToolCallID  string          `json:"toolCallId"`
			Output      json.RawMessage `json:"output"`
			Dynamic     bool            `json:"dynamic"`
			Preliminary bool            `json:"preliminary,omitempty"`
		}{"tool-output-available", p.ToolCallID, orNull(p.Output), true, p.Preliminary})
	case codec.Plan:
		return data(dst, "data-plan", "plan", p.Data)
	default: // codec.Data and kinds this encoder does not know
		name := p.Name
		if name == "" {
			name = p.Kind.String()
		}
		id := ""
		if p.ID != 0 {
			id = strconv.FormatUint(p.ID, 10)
		}
		return data(dst, "data-"+name, id, p.Data)
	}
}

// delta appends a text or reasoning delta to block b (kind "text" or
// "reasoning"), closing the other block and opening b as needed.
func (e *Encoder) delta(dst []byte, b, other *block, kind string, p codec.Part) []byte {
	if p.Text == "" {
		return dst
	}
	dst = closeBlock(dst, other, otherKind(kind))
	if b.id != "" && b.session != p.Session {
		dst = closeBlock(dst, b, kind)
	}
	if b.id == "" {
		b.id, b.session = kind+"-"+strconv.FormatUint(p.First(), 10), p.Session
		dst = chunk(dst, struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}{kind + "-start", b.id})
	}
	return deltaChunk(dst, b, kind, b.join.Next(p.Text))
}

// deltaChunk appends a delta chunk of d to block b (none for an empty d:
// half a surrogate pair held for the next delta).
func deltaChunk(dst []byte, b *block, kind, d string) []byte {
	if d == "" {
		return dst
	}
	return chunk(dst, struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Delta string `json:"delta"`
	}{kind + "-delta", b.id, d})
}

func otherKind(kind string) string {
	if kind == "text" {
		return "reasoning"
	}
	return "text"
}

// closeBlocks ends the open text and reasoning blocks.
func (e *Encoder) closeBlocks(dst []byte) []byte {
	return closeBlock(closeBlock(dst, &e.text, "text"), &e.reasoning, "reasoning")
}

func closeBlock(dst []byte, b *block, kind string) []byte {
	if b.id == "" {
		return dst
	}
	dst = deltaChunk(dst, b, kind, b.join.Flush())
	dst = chunk(dst, struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}{kind + "-end", b.id})
	*b = block{}
	return dst
}

// tool returns the state of p's tool call, taking its name and title.
func (e *Encoder) tool(p codec.Part) *toolCall {
	t := e.tools[p.ToolCallID]
	if t == nil {
		t = &toolCall{}
		e.tools[p.ToolCallID] = t
	}
	if t.name == "" {
		t.name = p.ToolName
	}
	if t.title == "" {
		t.title = p.Title
	}
	return t
}

func (t *toolCall) toolName() string {
	if t.name == "" {
		return "tool"
	}
	return t.name
}

func (e *Encoder) inputStart(dst []byte, id string, t *toolCall) []byte {
	return chunk(dst, struct {
		Type       string `json:"type"`
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
		Dynamic    bool   `json:"dynamic"`
		Title      string `json:"title,omitempty"`
	}{"tool-input-start", id, t.toolName(), true, t.title})
}

func (e *Encoder) inputAvailable(dst []byte, id string, t *toolCall, input json.RawMessage) []byte {
	t.input = true
	if input == nil {
		input = json.RawMessage("{}")
	}
	return chunk(dst, struct {
		Type       string          `json:"type"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Input      json.RawMessage `json:"input"`
		Dynamic    bool            `json:"dynamic"`
		Title      string          `json:"title,omitempty"`
	}{"tool-input-available", id, t.toolName(), input, true, t.title})
}

// Finish ends the stream, once: it closes the open blocks, then writes for
// reason (the codec.Reason… of the turn's end) complete: finish
// (finishReason "stop"); cancelled: abort (reason "cancelled"), the
// partial message kept; anything else (error, producer_lost): an error
// chunk with message (else the reason) and finish (finishReason "error");
// and last data: [DONE].
func (e *Encoder) Finish(dst []byte, reason, message string) []byte {
	if e.done {
		return dst
	}
	dst = e.closeBlocks(e.Start(dst))
	e.done = true
	switch reason {
	case codec.ReasonComplete:
		dst = finish(dst, FinishStop)
	case codec.ReasonCancelled:
		dst = chunk(dst, struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		}{"abort", reason})
	default:
		if message == "" {
			message = reason
		}
		dst = chunk(dst, struct {
			Type      string `json:"type"`
			ErrorText string `json:"errorText"`
		}{"error", message})
		dst = finish(dst, FinishError)
	}
	return sse.AppendFrame(dst, sse.Frame{Data: []byte("[DONE]")})
}

func finish(dst []byte, reason string) []byte {
	return chunk(dst, struct {
		Type         string `json:"type"`
		FinishReason string `json:"finishReason"`
	}{"finish", reason})
}

// data appends a data-* chunk; an id makes a later chunk of the same type
// and id replace it.
func data(dst []byte, typ, id string, d json.RawMessage) []byte {
	return chunk(dst, struct {
		Type string          `json:"type"`
		ID   string          `json:"id,omitempty"`
		Data json.RawMessage `json:"data"`
	}{typ, id, orNull(d)})
}

// chunk appends v as one SSE frame.
func chunk(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // a part's JSON that is not valid (never from codec's decoders)
		b, _ = json.Marshal(struct {
			Type      string `json:"type"`
			ErrorText string `json:"errorText"`
		}{"error", "aisdk: " + err.Error()})
	}
	return sse.AppendFrame(dst, sse.Frame{Data: b})
}

// mustJSON is v's JSON (v of this package's own shapes: it cannot fail).
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}
