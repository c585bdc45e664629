package agentpool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// ErrShape reports a payload that is not the AgentPool event its type
// names; the wrapping error says what is wrong.
var ErrShape = errors.New("agentpool: not the event its type names")

// Parse reads the payload of an event of type typ (its event_kind) into
// the type of this package for that kind, or [Other] for any other kind.
// Values typed any (RawInput, ArgsDelta, ToolInput, …) come back as
// json.RawMessage. Errors (ErrShape): data that is not a JSON object, or
// members of the wrong JSON types (a part_delta without a delta object, a
// tool call event without tool_call_id).
func Parse(typ string, data []byte) (Event, error) {
	if d := bytes.TrimSpace(data); len(d) == 0 || d[0] != '{' {
		return nil, fmt.Errorf("%w: %s: the payload is not an object", ErrShape, typ)
	}
	bad := func(err error) (Event, error) { return nil, fmt.Errorf("%w: %s: %v", ErrShape, typ, err) }
	switch typ {
	case TypePartDelta:
		var d struct {
			PartDelta
			Delta *struct {
				Delta
				ArgsDelta json.RawMessage `json:"args_delta"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return bad(err)
		}
		if d.Delta == nil {
			return bad(errors.New("no delta object"))
		}
		out := d.PartDelta
		out.Delta = d.Delta.Delta
		out.Delta.ArgsDelta = raw(d.Delta.ArgsDelta)
		return out, nil
	case TypePartStart:
		var s struct {
			PartStart
			Part *struct {
				Part
				Args json.RawMessage `json:"args"`
			} `json:"part"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			return bad(err)
		}
		if s.Part == nil {
			return bad(errors.New("no part object"))
		}
		out := s.PartStart
		out.Part = s.Part.Part
		out.Part.Args = raw(s.Part.Args)
		return out, nil
	case TypeToolCallStart:
		var t struct {
			ToolCallStart
			RawInput json.RawMessage `json:"raw_input"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return bad(err)
		}
		if t.ToolCallID == "" {
			return bad(errors.New("no tool_call_id"))
		}
		out := t.ToolCallStart
		out.RawInput = raw(t.RawInput)
		return out, nil
	case TypeToolCallProgress:
		var p ToolCallProgress
		if err := json.Unmarshal(data, &p); err != nil {
			return bad(err)
		}
		if p.ToolCallID == "" {
			return bad(errors.New("no tool_call_id"))
		}
		return p, nil
	case TypeToolCallComplete:
		var c struct {
			ToolCallComplete
			ToolInput  json.RawMessage `json:"tool_input"`
			ToolResult json.RawMessage `json:"tool_result"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return bad(err)
		}
		if c.ToolCallID == "" {
			return bad(errors.New("no tool_call_id"))
		}
		out := c.ToolCallComplete
		out.ToolInput, out.ToolResult = raw(c.ToolInput), raw(c.ToolResult)
		return out, nil
	case TypePlanUpdate:
		var p PlanUpdate
		if err := json.Unmarshal(data, &p); err != nil {
			return bad(err)
		}
		return p, nil
	case TypeRunStarted:
		var r RunStarted
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r, nil
	case TypeRunError:
		var r RunError
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r, nil
	case TypeStreamComplete:
		var s struct {
			StreamComplete
			Message json.RawMessage `json:"message"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			return bad(err)
		}
		out := s.StreamComplete
		out.Message = raw(s.Message)
		return out, nil
	}
	return Other{Kind: typ, Raw: append(json.RawMessage(nil), data...)}, nil
}

// raw returns v as an any: nil for absent or null, else the JSON.
func raw(v json.RawMessage) any {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// Publish publishes e (not nil) to session with its event_kind as the
// event type.
// It returns what bus.Publish returns, with its errors; opts are passed on.
func Publish(bus *eventbus.Bus, session string, e Event, opts ...eventbus.PublishOption) (eventbus.Event, error) {
	return bus.Publish(session, e.Type(), e, opts...)
}
