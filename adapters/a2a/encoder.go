package a2a

import (
	"encoding/json"
	"strconv"

	"github.com/replaybus/replaybus/adapters/internal/evframe"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
)

// The task states this package writes.
const (
	StateSubmitted = "submitted"
	StateWorking   = "working"
	StateCompleted = "completed"
	StateCanceled  = "canceled"
	StateFailed    = "failed"
)

// Options configure an [Encoder].
type Options struct {
	// Version is the protocol of the stream (the request's); "" means V1.
	Version Version
	// RequestID is the JSON-RPC request's id, repeated by every response
	// (Request.ID); empty means null.
	RequestID json.RawMessage
	// TaskID and ContextID name the task (the turn) and its context (the
	// session).
	TaskID, ContextID string
	// Epoch, when set, qualifies the frame ids: "<epoch>-<seq>".
	Epoch string
}

// Encoder writes one task's stream. Not safe for concurrent use.
type Encoder struct {
	o         Options
	state     string
	done      bool
	text      block // the open text or reasoning artifact
	artifacts []*artifact
	byID      map[string]*artifact
	frames    evframe.Queue
}

// block is the open text or reasoning artifact; join pairs the halves of
// a surrogate pair that two deltas split (codec.TextJoin).
type block struct {
	id, kind, session string
	join              codec.TextJoin
}

// artifact is one artifact of the task as it stands.
type artifact struct {
	id, name string
	parts    []part
}

// part is a text part (isText; text appended to, not concatenated: a
// reply of n deltas costs O(n)) or a data part.
type part struct {
	isText bool
	text   []byte
	data   json.RawMessage
}

// endText ends the open text artifact: a half of a surrogate pair it
// held goes out as U+FFFD (codec.TextJoin.Flush).
func (e *Encoder) endText(ev uint64) {
	if d := e.text.join.Flush(); d != "" {
		e.update(ev, e.text.id, e.text.kind, textPart(d), true)
	}
	e.text = block{}
}

func textPart(s string) part { return part{isText: true, text: []byte(s)} }

// NewEncoder returns an Encoder for the task o names.
func NewEncoder(o Options) *Encoder {
	if o.Version == "" {
		o.Version = V1
	}
	return &Encoder{o: o, state: StateSubmitted, byID: map[string]*artifact{}, frames: evframe.Queue{Epoch: o.Epoch}}
}

// State returns the task's state: submitted until the first part, then
// working, then completed, canceled or failed.
func (e *Encoder) State() string { return e.state }

// Done reports whether the task reached a terminal state.
func (e *Encoder) Done() bool { return e.done }

// Skip sets how many of the next frames are computed but not written,
// as agui.Encoder.Skip does: n > 0 the next n, n < 0 all until Skip is
// called again, 0 none.
func (e *Encoder) Skip(n int) { e.frames.Skip(n) }

// Task appends the task as it stands — id, context, status, every
// artifact so far with its text merged — as one frame with id "<epoch>-<id>"
// (id: the last event it reflects; 0 writes no id). A stream starts with
// it; a resubscribe sends it first.
func (e *Encoder) Task(dst []byte, id uint64) []byte {
	arts := make([]any, 0, len(e.artifacts))
	for _, a := range e.artifacts {
		arts = append(arts, e.artifactJSON(a, a.parts))
	}
	t := map[string]any{"id": e.o.TaskID, "contextId": e.o.ContextID, "status": e.status(e.state, "")}
	if len(arts) > 0 {
		t["artifacts"] = arts
	}
	var b []byte
	if e.o.Version == V03 {
		t["kind"] = "task"
		b = e.response(t)
	} else {
		b = e.response(map[string]any{"task": t})
	}
	f := sse.Frame{Data: b}
	if id != 0 {
		f.ID = e.frames.Cursor(id)
	}
	return sse.AppendFrame(dst, f)
}

// Append appends the updates of parts, the parts of one event (as
// agui.Encoder.Append takes them): the first moves the task to working; a
// Finish part ends it (see [Encoder.Finish]); after the end nothing is
// written.
func (e *Encoder) Append(dst []byte, parts ...codec.Part) []byte {
	for _, p := range parts {
		if e.done {
			break
		}
		e.part(p)
	}
	return e.flush(dst)
}

// Finish ends the task, once, as the Finish part of event id: completed
// for codec.ReasonComplete, canceled for ReasonCancelled, failed (with
// message, else the reason, as the status message) for any other; in 0.3
// the update is final.
func (e *Encoder) Finish(dst []byte, id uint64, reason, message string) []byte {
	if !e.done {
		e.part(codec.Part{Kind: codec.Finish, ID: id, Reason: reason, Text: message})
	}
	return e.flush(dst)
}

func (e *Encoder) part(p codec.Part) {
	ev := p.ID
	if e.state == StateSubmitted && p.Kind != codec.Finish {
		e.state = StateWorking
		e.statusUpdate(ev, StateWorking, "", nil)
	}
	switch p.Kind {
	case codec.Start:
	case codec.Text, codec.Reasoning:
		if p.Text == "" {
			return
		}
		kind := "text"
		if p.Kind == codec.Reasoning {
			kind = "reasoning"
		}
		if e.text.id != "" && (e.text.kind != kind || e.text.session != p.Session) {
			e.endText(ev)
		}
		if e.text.id == "" {
			e.text = block{id: kind + "-" + strconv.FormatUint(p.First(), 10), kind: kind, session: p.Session}
			e.update(ev, e.text.id, kind, textPart(e.text.join.Next(p.Text)), false)
			return
		}
		if d := e.text.join.Next(p.Text); d != "" {
			e.update(ev, e.text.id, kind, textPart(d), true)
		}
	case codec.ToolInputStart, codec.ToolInputDelta, codec.ToolInput, codec.ToolOutput, codec.ToolError:
		e.endText(ev)
		id := "tool-" + p.ToolCallID
		var d map[string]any
		switch p.Kind {
		case codec.ToolInputStart:
			d = map[string]any{"toolCallId": p.ToolCallID, "toolName": p.ToolName, "title": p.Title}
		case codec.ToolInputDelta:
			d = map[string]any{"toolCallId": p.ToolCallID, "inputDelta": p.Text}
		case codec.ToolInput:
			d = map[string]any{"toolCallId": p.ToolCallID, "input": orNull(p.Input)}
		case codec.ToolOutput:
			d = map[string]any{"toolCallId": p.ToolCallID, "output": orNull(p.Output), "preliminary": p.Preliminary}
		case codec.ToolError:
			d = map[string]any{"toolCallId": p.ToolCallID, "error": p.Text}
		}
		b, _ := json.Marshal(d)
		name := "tool call"
		if p.Title != "" {
			name = p.Title
		}
		e.update(ev, id, name, part{data: b}, e.byID[id] != nil)
	case codec.Plan:
		e.endText(ev)
		e.update(ev, "plan", "plan", part{data: orNull(p.Data)}, false)
	case codec.Finish:
		e.endText(ev)
		e.done = true
		switch p.Reason {
		case codec.ReasonComplete:
			e.state = StateCompleted
		case codec.ReasonCancelled:
			e.state = StateCanceled
		default:
			e.state = StateFailed
		}
		msg := ""
		if e.state == StateFailed {
			msg = p.Text
			if msg == "" {
				msg = p.Reason
			}
		}
		e.statusUpdate(ev, e.state, msg, nil)
	default: // codec.Data and kinds this encoder does not know
		e.endText(ev)
		name := p.Name
		if name == "" {
			name = p.Kind.String()
		}
		e.statusUpdate(ev, StateWorking, "", &dataMessage{name, orNull(p.Data)})
	}
}

// dataMessage is an event passed on in a working status update's message.
type dataMessage struct {
	name string
	data json.RawMessage
}

// update records and queues an artifact update: a new artifact, one
// replaced (append false), or p appended to it.
func (e *Encoder) update(ev uint64, id, name string, p part, appendTo bool) {
	a := e.byID[id]
	switch {
	case a == nil:
		a = &artifact{id: id, name: name}
		e.artifacts = append(e.artifacts, a)
		e.byID[id] = a
		a.parts = []part{p}
		if p.isText { // its own copy: the text grows by append
			a.parts[0].text = append([]byte(nil), p.text...)
		}
	case appendTo && p.isText && len(a.parts) > 0 && a.parts[len(a.parts)-1].isText:
		last := &a.parts[len(a.parts)-1]
		last.text = append(last.text, p.text...)
	case appendTo:
		a.parts = append(a.parts, p)
	default:
		a.parts = []part{p}
	}
	u := map[string]any{"taskId": e.o.TaskID, "contextId": e.o.ContextID,
		"artifact": e.artifactJSON(a, []part{p}), "append": appendTo, "lastChunk": false}
	if e.o.Version == V03 {
		u["kind"] = "artifact-update"
		e.emit(ev, u)
		return
	}
	e.emit(ev, map[string]any{"artifactUpdate": u})
}

func (e *Encoder) statusUpdate(ev uint64, state, text string, d *dataMessage) {
	st := e.status(state, text)
	u := map[string]any{"taskId": e.o.TaskID, "contextId": e.o.ContextID, "status": st}
	if d != nil {
		st["message"] = e.message("event-"+strconv.FormatUint(ev, 10), []part{{data: d.data}})
		u["metadata"] = map[string]any{"type": d.name}
	}
	if e.o.Version == V03 {
		u["kind"], u["final"] = "status-update", e.done
		e.emit(ev, u)
		return
	}
	e.emit(ev, map[string]any{"statusUpdate": u})
}

// status returns a status of state; text, when set, is its message.
func (e *Encoder) status(state, text string) map[string]any {
	s := map[string]any{"state": state}
	if e.o.Version == V1 {
		s["state"] = "TASK_STATE_" + upper(state) // 1.0's enum names
	}
	if text != "" {
		s["message"] = e.message(e.o.TaskID+"-status", []part{textPart(text)})
	}
	return s
}

func (e *Encoder) message(id string, parts []part) map[string]any {
	m := map[string]any{"messageId": id, "taskId": e.o.TaskID, "contextId": e.o.ContextID, "parts": e.partsJSON(parts)}
	if e.o.Version == V03 {
		m["kind"], m["role"] = "message", "agent"
	} else {
		m["role"] = "ROLE_AGENT"
	}
	return m
}

func (e *Encoder) artifactJSON(a *artifact, parts []part) map[string]any {
	return map[string]any{"artifactId": a.id, "name": a.name, "parts": e.partsJSON(parts)}
}

// partsJSON writes parts in the version's form: 1.0 {"text"} and
// {"data", "mediaType"}; 0.3 {"kind":"text"} and {"kind":"data"} whose
// data is an object (another value is wrapped as {"value": …}).
func (e *Encoder) partsJSON(parts []part) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.isText && e.o.Version == V03:
			out = append(out, map[string]any{"kind": "text", "text": string(p.text)})
		case p.isText:
			out = append(out, map[string]any{"text": string(p.text)})
		case e.o.Version == V03:
			d := p.data
			if len(d) == 0 || d[0] != '{' {
				d, _ = json.Marshal(map[string]json.RawMessage{"value": orNull(d)})
			}
			out = append(out, map[string]any{"kind": "data", "data": d})
		default:
			out = append(out, map[string]any{"data": orNull(p.data), "mediaType": "application/json"})
		}
	}
	return out
}

// response wraps a result in the JSON-RPC response of the request.
func (e *Encoder) response(result any) []byte {
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{jsonrpcVersion, orNull(e.o.RequestID), result})
	if err != nil { // a part's JSON that is not valid (never from codec's decoders)
		return AppendError(nil, e.o.RequestID, &Error{CodeInternalError, clip(err.Error())})
	}
	return b
}

func (e *Encoder) emit(ev uint64, result any) {
	e.frames.Add(evframe.Frame{Event: ev, Data: e.response(result)})
}

// flush writes the queued frames with their ids (see the package doc).
func (e *Encoder) flush(dst []byte) []byte { return e.frames.Flush(dst, nil) }

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
