package agui

import (
	"encoding/json"
	"strconv"

	"github.com/replaybus/replaybus/adapters/internal/evframe"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
)

// CodeCancelled is the code of the RUN_ERROR that ends a cancelled run
// (a turn_end with reason cancelled): the stop button, a cancel through
// the bus, a closed session.
const CodeCancelled = "cancelled"

// Options configure an [Encoder].
type Options struct {
	// ThreadID and RunID name the run in RUN_STARTED and RUN_FINISHED
	// (AG-UI's thread: the session; its run: the turn). RunID also
	// prefixes the message ids, which are unique in the thread so.
	ThreadID, RunID string
	// Epoch, when set, qualifies the frame ids: "<epoch>-<seq>"; "" writes
	// the plain "<seq>".
	Epoch string
}

// Encoder writes one run's AG-UI events. Not safe for concurrent use.
type Encoder struct {
	o         Options
	started   bool
	done      bool
	text      open // the open text message
	reasoning open // the open reasoning message
	tools     map[string]*toolCall
	lastText  string // the last text message: tool calls' parent
	msgs      []*message
	byID      map[string]*message
	frames    evframe.Queue
	// opened lists what the frames so far (written or skipped) opened and
	// did not close, in order, with the frame that opened it: what a
	// reattaching stream opens again.
	opened []openFrame
	// prologue is a Reattach waiting for the skipped frames to pass.
	prologue *prologue
}

type openFrame struct {
	key  string
	data []byte
}

type prologue struct {
	cursor   string
	snapshot bool
}

// open is an open text or reasoning message; join pairs the halves of a
// surrogate pair that two deltas split (codec.TextJoin).
type open struct {
	id, session string
	join        codec.TextJoin
}

// toolCall is what the stream said about one tool call.
type toolCall struct {
	name   string
	opened bool // TOOL_CALL_START written
	args   bool // TOOL_CALL_ARGS written
	ended  bool // TOOL_CALL_END written
	result bool
	parent *message
}

// message is one message of the run, as a MESSAGES_SNAPSHOT lists it.
type message struct {
	ID           string         `json:"id"`
	Role         string         `json:"role"`
	Content      any            `json:"content,omitempty"`
	ToolCalls    []*toolCallMsg `json:"toolCalls,omitempty"`
	ToolCallID   string         `json:"toolCallId,omitempty"`
	ActivityType string         `json:"activityType,omitempty"`
	Error        string         `json:"error,omitempty"`
	text         []byte         // appended to, not concatenated: a reply of n deltas costs O(n)
}

type toolCallMsg struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// NewEncoder returns an Encoder for the run o names.
func NewEncoder(o Options) *Encoder {
	return &Encoder{o: o, tools: map[string]*toolCall{}, byID: map[string]*message{}, frames: evframe.Queue{Epoch: o.Epoch}}
}

// Done reports whether the run has ended (RUN_FINISHED or RUN_ERROR).
func (e *Encoder) Done() bool { return e.done }

// Skip sets how many of the next frames are computed but not written:
// n > 0 the next n (a resume after "<epoch>-<N>:k" skips k+1 of event
// N's), n < 0 every frame until Skip is called again (priming with the
// events before a stream's start), 0 none.
func (e *Encoder) Skip(n int) { e.frames.Skip(n) }

// Append appends the frames of parts, the parts of one event (those
// codec.Set.Decode gives for it; consecutive parts with another id start
// another event's frames): a Start part writes RUN_STARTED, a Finish part
// ends the run (see [Encoder.Finish]); the first frame of a run not
// started is preceded by RUN_STARTED; after the end nothing is written.
func (e *Encoder) Append(dst []byte, parts ...codec.Part) []byte {
	for _, p := range parts {
		if e.done {
			break
		}
		e.part(p)
	}
	return e.flush(dst)
}

// Finish ends the run, once, as the Finish part of event id: it ends the
// open messages and tool calls, then writes for reason (a codec.Reason…)
// complete: RUN_FINISHED with outcome success; cancelled: RUN_ERROR with
// code CodeCancelled (message: "the run was cancelled" unless set);
// anything else: RUN_ERROR with message (else the reason) and the reason
// as code.
func (e *Encoder) Finish(dst []byte, id uint64, reason, message string) []byte {
	if !e.done {
		e.part(codec.Part{Kind: codec.Finish, ID: id, Reason: reason, Text: message})
	}
	return e.flush(dst)
}

func (e *Encoder) part(p codec.Part) {
	ev := p.ID
	if !e.started {
		e.started = true
		e.emit(ev, map[string]any{"type": "RUN_STARTED", "threadId": e.o.ThreadID, "runId": e.o.RunID})
	}
	switch p.Kind {
	case codec.Start:
		return
	case codec.Text:
		if p.Text == "" {
			return
		}
		e.closeReasoning(ev)
		e.closeArgs(ev)
		if e.text.id != "" && e.text.session != p.Session {
			e.closeText(ev)
		}
		if e.text.id == "" {
			id := e.id("text", p.First())
			e.text = open{id: id, session: p.Session}
			e.lastText = id
			e.add(&message{ID: id, Role: "assistant"})
			e.emitOpen(ev, "text:"+id, map[string]any{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
		}
		e.content(ev, &e.text, "TEXT_MESSAGE_CONTENT", e.text.join.Next(p.Text))
		return
	case codec.Reasoning:
		if p.Text == "" {
			return
		}
		e.closeText(ev)
		e.closeArgs(ev)
		if e.reasoning.id != "" && e.reasoning.session != p.Session {
			e.closeReasoning(ev)
		}
		if e.reasoning.id == "" {
			id := e.id("reasoning", p.First())
			e.reasoning = open{id: id, session: p.Session}
			e.add(&message{ID: id, Role: "reasoning"})
			e.emitOpen(ev, "span:"+id, map[string]any{"type": "REASONING_START", "messageId": id})
			e.emitOpen(ev, "reasoning:"+id, map[string]any{"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"})
		}
		e.content(ev, &e.reasoning, "REASONING_MESSAGE_CONTENT", e.reasoning.join.Next(p.Text))
		return
	case codec.Finish:
		e.closeText(ev)
		e.closeReasoning(ev)
		for _, m := range e.msgs { // every tool call still open, in order
			for _, tc := range m.ToolCalls {
				e.endTool(ev, tc.ID)
			}
		}
		e.done = true
		switch p.Reason {
		case codec.ReasonComplete:
			e.emit(ev, e.runFinished("success"))
		case codec.ReasonCancelled:
			msg := p.Text
			if msg == "" {
				msg = "the run was cancelled"
			}
			e.emit(ev, map[string]any{"type": "RUN_ERROR", "message": msg, "code": CodeCancelled})
		default:
			msg := p.Text
			if msg == "" {
				msg = p.Reason
			}
			e.emit(ev, map[string]any{"type": "RUN_ERROR", "message": msg, "code": p.Reason})
		}
		return
	}
	e.closeText(ev)
	e.closeReasoning(ev)
	switch p.Kind {
	case codec.ToolInputStart:
		e.openTool(ev, p)
	case codec.ToolInputDelta:
		t := e.openTool(ev, p)
		if t.ended {
			e.custom(ev, "tool-input-delta", map[string]any{"toolCallId": p.ToolCallID, "delta": p.Text})
			return
		}
		if p.Text != "" {
			t.args = true
			e.toolMsg(p.ToolCallID).Function.Arguments += p.Text
			e.emit(ev, map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": p.ToolCallID, "delta": p.Text})
		}
	case codec.ToolInput:
		t := e.openTool(ev, p)
		if t.ended {
			e.custom(ev, "tool-input", map[string]any{"toolCallId": p.ToolCallID, "input": rawOrNull(p.Input)})
			return
		}
		if !t.args && len(p.Input) > 0 {
			t.args = true
			e.toolMsg(p.ToolCallID).Function.Arguments = string(p.Input)
			e.emit(ev, map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": p.ToolCallID, "delta": string(p.Input)})
		}
		e.endTool(ev, p.ToolCallID)
	case codec.ToolOutput, codec.ToolError:
		e.openTool(ev, p)
		e.endTool(ev, p.ToolCallID)
		if p.Kind == codec.ToolOutput && p.Preliminary {
			e.custom(ev, "tool-output-preliminary", map[string]any{"toolCallId": p.ToolCallID, "output": rawOrNull(p.Output)})
			return
		}
		e.result(ev, p)
	case codec.Plan:
		id := e.o.RunID + "-plan"
		var content any = map[string]any{}
		_ = json.Unmarshal(p.Data, &content)
		if _, ok := content.(map[string]any); !ok {
			content = map[string]any{"value": content}
		}
		if m := e.byID[id]; m != nil {
			m.Content = content
		} else {
			e.add(&message{ID: id, Role: "activity", ActivityType: "plan", Content: content})
		}
		e.emit(ev, map[string]any{"type": "ACTIVITY_SNAPSHOT", "messageId": id, "activityType": "plan",
			"content": content, "replace": true})
	default: // codec.Data and kinds this encoder does not know
		name := p.Name
		if name == "" {
			name = p.Kind.String()
		}
		e.custom(ev, name, rawOrNull(p.Data))
	}
}

// openTool returns p's tool call, writing its TOOL_CALL_START first if the
// stream has not.
func (e *Encoder) openTool(ev uint64, p codec.Part) *toolCall {
	t := e.tools[p.ToolCallID]
	if t == nil {
		t = &toolCall{}
		e.tools[p.ToolCallID] = t
	}
	if t.name == "" {
		t.name = p.ToolName
	}
	if t.opened {
		return t
	}
	t.opened = true
	name := t.name
	if name == "" {
		name = "tool"
	}
	f := map[string]any{"type": "TOOL_CALL_START", "toolCallId": p.ToolCallID, "toolCallName": name}
	if t.parent = e.byID[e.lastText]; t.parent != nil {
		f["parentMessageId"] = e.lastText
	} else {
		t.parent = e.add(&message{ID: p.ToolCallID, Role: "assistant"})
	}
	tc := &toolCallMsg{ID: p.ToolCallID, Type: "function"}
	tc.Function.Name = name
	t.parent.ToolCalls = append(t.parent.ToolCalls, tc)
	e.emitOpen(ev, "tool:"+p.ToolCallID, f)
	return t
}

func (e *Encoder) toolMsg(id string) *toolCallMsg {
	for _, tc := range e.tools[id].parent.ToolCalls {
		if tc.ID == id {
			return tc
		}
	}
	return &toolCallMsg{}
}

func (e *Encoder) endTool(ev uint64, id string) {
	if t := e.tools[id]; t.opened && !t.ended {
		t.ended = true
		e.emitClose(ev, "tool:"+id, map[string]any{"type": "TOOL_CALL_END", "toolCallId": id})
	}
}

// closeArgs ends the tool calls whose arguments are streaming, before
// text or reasoning is written.
func (e *Encoder) closeArgs(ev uint64) {
	for _, m := range e.msgs {
		for _, tc := range m.ToolCalls {
			if t := e.tools[tc.ID]; t.args && !t.ended {
				e.endTool(ev, tc.ID)
			}
		}
	}
}

// result writes a tool call's TOOL_CALL_RESULT (an error as its content,
// with metadata {"error": true}); a second result of one call replaces
// the first in the snapshot.
func (e *Encoder) result(ev uint64, p codec.Part) {
	id := e.o.RunID + "-result-" + p.ToolCallID
	content := p.Text
	if p.Kind == codec.ToolOutput && content == "" {
		content = string(rawOrNull(p.Output))
		var s string
		if json.Unmarshal(p.Output, &s) == nil {
			content = s
		}
	}
	f := map[string]any{"type": "TOOL_CALL_RESULT", "messageId": id, "toolCallId": p.ToolCallID, "content": content, "role": "tool"}
	m := &message{ID: id, Role: "tool", Content: content, ToolCallID: p.ToolCallID}
	if p.Kind == codec.ToolError {
		f["metadata"] = map[string]any{"error": true}
		m.Error = content
	}
	if old := e.byID[id]; old != nil {
		*old = *m
	} else {
		e.insertResult(m, e.tools[p.ToolCallID].parent)
	}
	e.tools[p.ToolCallID].result = true
	e.emit(ev, f)
}

// insertResult puts a tool message after its call's message and the
// results already there, as the client's reducer does.
func (e *Encoder) insertResult(m *message, parent *message) {
	i := len(e.msgs)
	for j, x := range e.msgs {
		if x == parent {
			i = j + 1
			for i < len(e.msgs) && e.msgs[i].Role == "tool" {
				i++
			}
			break
		}
	}
	e.msgs = append(e.msgs[:i], append([]*message{m}, e.msgs[i:]...)...)
	e.byID[m.ID] = m
}

// content writes delta d of open message o as an event of type typ (none
// for an empty d: a half of a surrogate pair held for the next delta).
func (e *Encoder) content(ev uint64, o *open, typ, d string) {
	if d == "" {
		return
	}
	m := e.byID[o.id]
	m.text = append(m.text, d...)
	e.emit(ev, map[string]any{"type": typ, "messageId": o.id, "delta": d})
}

func (e *Encoder) closeText(ev uint64) {
	if e.text.id != "" {
		e.content(ev, &e.text, "TEXT_MESSAGE_CONTENT", e.text.join.Flush())
		e.emitClose(ev, "text:"+e.text.id, map[string]any{"type": "TEXT_MESSAGE_END", "messageId": e.text.id})
		e.text = open{}
	}
}

func (e *Encoder) closeReasoning(ev uint64) {
	if e.reasoning.id != "" {
		e.content(ev, &e.reasoning, "REASONING_MESSAGE_CONTENT", e.reasoning.join.Flush())
		e.emitClose(ev, "reasoning:"+e.reasoning.id, map[string]any{"type": "REASONING_MESSAGE_END", "messageId": e.reasoning.id})
		e.emitClose(ev, "span:"+e.reasoning.id, map[string]any{"type": "REASONING_END", "messageId": e.reasoning.id})
		e.reasoning = open{}
	}
}

func (e *Encoder) custom(ev uint64, name string, value any) {
	e.emit(ev, map[string]any{"type": "CUSTOM", "name": name, "value": value})
}

func (e *Encoder) runFinished(outcome string) map[string]any {
	return map[string]any{"type": "RUN_FINISHED", "threadId": e.o.ThreadID, "runId": e.o.RunID,
		"outcome": map[string]any{"type": outcome}}
}

// id returns the id of a message of kind that starts at event first.
func (e *Encoder) id(kind string, first uint64) string {
	return e.o.RunID + "-" + kind + "-" + strconv.FormatUint(first, 10)
}

func (e *Encoder) add(m *message) *message {
	e.msgs = append(e.msgs, m)
	e.byID[m.ID] = m
	return m
}

// emit queues one frame of event ev.
func (e *Encoder) emit(ev uint64, v map[string]any) {
	e.frames.Add(evframe.Frame{Event: ev, Data: encode(v)})
}

// emitOpen queues a frame that opens key; emitClose one that closes it.
func (e *Encoder) emitOpen(ev uint64, key string, v map[string]any) {
	e.frames.Add(evframe.Frame{Event: ev, Data: encode(v), Opens: key})
}

func (e *Encoder) emitClose(ev uint64, key string, v map[string]any) {
	e.frames.Add(evframe.Frame{Event: ev, Data: encode(v), Closes: key})
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // a part's JSON that is not valid (never from codec's decoders)
		b, _ = json.Marshal(map[string]any{"type": "CUSTOM", "name": "encoding-error", "value": err.Error()})
	}
	return b
}

// flush writes the queued frames (see evframe), writing a waiting
// Reattach prologue before the first frame written after a skip, and
// noting what each frame opens or closes.
func (e *Encoder) flush(dst []byte) []byte {
	dst = e.frames.Flush(dst, func(dst []byte, f evframe.Frame, written bool) []byte {
		if written {
			dst = e.writePrologue(dst)
		}
		e.track(f)
		return dst
	})
	return e.writePrologue(dst)
}

// track notes what f opens or closes.
func (e *Encoder) track(f evframe.Frame) {
	switch {
	case f.Opens != "":
		e.opened = append(e.opened, openFrame{f.Opens, f.Data})
	case f.Closes != "":
		for i, o := range e.opened {
			if o.key == f.Closes {
				e.opened = append(e.opened[:i], e.opened[i+1:]...)
				break
			}
		}
	}
}

// Reattach appends the prologue of a stream that does not start at the
// run's beginning: RUN_STARTED, with snapshot a MESSAGES_SNAPSHOT of
// every message so far, and again the start event of every message,
// reasoning span and tool call still open, so that what follows continues
// them. Prime the encoder first with the events before the stream's start
// (Skip(-1), Append them, Skip(0)); to resume after "<epoch>-<N>:k" also
// Skip(k+1) before appending event N: the prologue is then written when
// the skipped frames have passed, reflecting what they opened. Each
// prologue frame's id is cursor, the position the stream resumes after,
// so a client cut inside the prologue resumes from the same place.
func (e *Encoder) Reattach(dst []byte, cursor string, snapshot bool) []byte {
	e.prologue = &prologue{cursor, snapshot}
	return e.writePrologue(dst)
}

// writePrologue writes a waiting Reattach once no frame is to be skipped.
func (e *Encoder) writePrologue(dst []byte) []byte {
	p := e.prologue
	if p == nil || e.frames.Skipping() {
		return dst
	}
	e.prologue = nil
	e.started = true
	frame := func(b []byte) { dst = sse.AppendFrame(dst, sse.Frame{ID: p.cursor, Data: b}) }
	frame(encode(map[string]any{"type": "RUN_STARTED", "threadId": e.o.ThreadID, "runId": e.o.RunID}))
	if p.snapshot {
		frame(encode(map[string]any{"type": "MESSAGES_SNAPSHOT", "messages": e.Messages()}))
	}
	for _, o := range e.opened {
		frame(o.data)
	}
	return dst
}

// Messages returns the run's messages so far, as a MESSAGES_SNAPSHOT
// lists them: assistant text messages with their tool calls, reasoning
// messages, tool results, the plan as an activity message.
func (e *Encoder) Messages() []any {
	out := make([]any, 0, len(e.msgs))
	for _, m := range e.msgs {
		c := *m
		switch c.Role {
		case "assistant":
			if len(c.text) > 0 {
				c.Content = string(c.text)
			}
		case "reasoning":
			c.Content = string(c.text)
		}
		out = append(out, c)
	}
	return out
}

func rawOrNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}
