package codec

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Kind says what a [Part] is.
type Kind uint8

// The kinds of part. Each names the fields of [Part] it sets, beside ID
// and Session, which every part carries.
const (
	// Text is a piece of the reply: Text. A compacted record's is the
	// whole reply so far (or, resumed inside it, the rest).
	Text Kind = iota + 1
	// Reasoning is a piece of reasoning: Text.
	Reasoning
	// ToolInputStart announces a tool call: ToolCallID, ToolName, Title.
	ToolInputStart
	// ToolInputDelta is a piece of a tool call's input as JSON text:
	// ToolCallID, Text.
	ToolInputDelta
	// ToolInput is a tool call's whole input: ToolCallID, ToolName, Title,
	// Input (JSON).
	ToolInput
	// ToolOutput is a tool call's result: ToolCallID, Output (JSON), Text
	// (its text, when it has one), Preliminary (more output follows).
	ToolOutput
	// ToolError says a tool call failed: ToolCallID, Text (the error).
	ToolError
	// Plan is the whole plan, replacing any earlier one: Data
	// ({"entries": […]} of ACP plan entries).
	Plan
	// Data is any other event, passed on as the protocol's custom event:
	// Name (the event type) and Data (its JSON payload; a byte payload as
	// {"contentType", "base64"}).
	Data
	// Start opens a turn (a run): Turn.
	Start
	// Finish ends a turn: Turn, Reason (ReasonComplete, ReasonCancelled,
	// ReasonError, ReasonProducerLost), Text (the error message).
	Finish
)

var kindNames = [...]string{"", "text", "reasoning", "tool-input-start", "tool-input-delta", "tool-input",
	"tool-output", "tool-error", "plan", "data", "start", "finish"}

// String returns the kind's name ("text", "tool-input-start", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// The reasons a turn ends ([Finish] parts): those of the bus's turn_end.
const (
	ReasonComplete     = frame.ReasonComplete
	ReasonCancelled    = frame.ReasonCancelled
	ReasonError        = frame.ReasonError
	ReasonProducerLost = frame.ReasonProducerLost
)

// Part is one protocol-neutral piece of a turn, decoded from a bus event.
// Kind says which other fields are set.
type Part struct {
	Kind Kind
	// ID is the id of the event the part came from (of a merged or
	// compacted record: its last event's); Session its session. FirstID
	// is a merged or compacted record's first event's id, 0 otherwise:
	// ids derived from a part (a message's) use FirstID when set, so that
	// a record folded after a client saw its first event keeps the id the
	// client knows.
	ID      uint64
	FirstID uint64
	Session string

	ToolCallID string
	ToolName   string
	Title      string
	// Text: see the Kind. A text chunk's may end or start with half a
	// UTF-16 surrogate pair its producer split (WTF-8): join a stream's
	// texts with TextJoin.
	Text string
	// Input, Output and Data are JSON.
	Input  json.RawMessage
	Output json.RawMessage
	Data   json.RawMessage
	// Preliminary marks a ToolOutput that a later one replaces.
	Preliminary bool
	// Name is a Data part's name: the event type.
	Name string
	// Turn names the turn of a Start or Finish; Reason why it finished.
	Turn   string
	Reason string
}

// Decoder turns the bus events it knows into parts. Decode appends ev's
// parts to dst (none is fine: an event that carries nothing a protocol
// shows) and reports whether it knows ev's type and shape; a [Set] passes
// an event no decoder knows on as a [Data] part. A Decoder must be safe
// for concurrent use and must not modify ev.Data (parts may share it).
type Decoder interface {
	Decode(dst []Part, ev eventbus.Event) ([]Part, bool)
}

// DecoderFunc is a function that is a [Decoder].
type DecoderFunc func(dst []Part, ev eventbus.Event) ([]Part, bool)

// Decode calls f.
func (f DecoderFunc) Decode(dst []Part, ev eventbus.Event) ([]Part, bool) { return f(dst, ev) }

// Set decodes with its decoders in order: the first that knows an event
// decodes it, and an event none knows becomes one [Data] part, so that
// nothing is dropped. A Set is immutable and safe for concurrent use.
type Set struct {
	decoders []Decoder
}

// New returns a Set of decoders, tried in the order given; nil ones are
// skipped. An application's own goes first to override a built-in one:
// codec.New(mine, codec.Turns, codec.ACP, codec.AgentPool).
func New(decoders ...Decoder) *Set {
	s := &Set{}
	for _, d := range decoders {
		if d != nil {
			s.decoders = append(s.decoders, d)
		}
	}
	return s
}

// Default decodes turn lifecycle events, ACP shapes and AgentPool shapes.
var Default = New(Turns, ACP, AgentPool)

// Decode appends the parts of ev to dst: those of the first decoder that
// knows ev, else one Data part. A synthetic frame (ID 0) is decoded like
// any event.
func (s *Set) Decode(dst []Part, ev eventbus.Event) []Part {
	for _, d := range s.decoders {
		if out, ok := d.Decode(dst, ev); ok {
			return out
		}
	}
	return append(dst, DataPart(ev))
}

// DataPart returns ev as a [Data] part: its type as Name, its payload as
// Data (null when it has none; a byte payload as {"contentType",
// "base64"}).
func DataPart(ev eventbus.Event) Part {
	p := part(Data, ev)
	p.Name, p.Data = ev.Type, json.RawMessage("null")
	switch {
	case !ev.IsJSON():
		b, _ := json.Marshal(struct {
			ContentType string `json:"contentType"`
			Base64      string `json:"base64"`
		}{ev.ContentType(), base64.StdEncoding.EncodeToString(ev.Data)})
		p.Data = b
	case len(ev.Data) > 0:
		p.Data = ev.Data
	}
	return p
}

// part returns a part of kind k from ev.
func part(k Kind, ev eventbus.Event) Part {
	return Part{Kind: k, ID: ev.ID, FirstID: ev.FirstID, Session: ev.Session}
}

// First returns p.FirstID, or p.ID when p is not merged: the id of the
// first event p holds.
func (p Part) First() uint64 {
	if p.FirstID != 0 {
		return p.FirstID
	}
	return p.ID
}
