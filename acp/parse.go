package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// ErrShape reports a payload that is not a session/update notification
// of the kind it claims; the wrapping error names what is wrong.
var ErrShape = errors.New("acp: not a session/update notification")

// Parse reads the params of a session/update notification (an event's
// payload) into a [Notification] whose Update is the typed value of its
// kind — [ContentChunk], [ToolCall], [ToolCallUpdate], [Plan] — or [Other]
// for any other kind. RawInput and RawOutput come back as json.RawMessage.
// Errors (ErrShape, naming the problem): data that is not a JSON object,
// no "update" object, no string "sessionUpdate", or a typed kind whose
// members have the wrong JSON types (a tool call without toolCallId, a
// chunk without a content object).
func Parse(data []byte) (Notification, error) {
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if err := json.Unmarshal(data, &n); err != nil {
		return Notification{}, fmt.Errorf("%w: %v", ErrShape, err)
	}
	u, err := ParseUpdate(n.Update)
	if err != nil {
		return Notification{}, err
	}
	return Notification{SessionID: n.SessionID, Update: u}, nil
}

// ParseUpdate reads one update object, as [Parse] reads the "update" of
// a notification.
func ParseUpdate(data []byte) (Update, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: the update is not an object", ErrShape)
	}
	var head struct {
		Kind *string `json:"sessionUpdate"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.Kind == nil {
		return nil, fmt.Errorf("%w: no string sessionUpdate", ErrShape)
	}
	bad := func(err error) (Update, error) {
		return nil, fmt.Errorf("%w: %s: %v", ErrShape, *head.Kind, err)
	}
	switch kind := *head.Kind; kind {
	case TypeMessageChunk, TypeThoughtChunk, TypeUserMessageChunk:
		var c struct {
			Content   *ContentBlock `json:"content"`
			MessageID *string       `json:"messageId"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return bad(err)
		}
		if c.Content == nil {
			return bad(errors.New("no content"))
		}
		out := ContentChunk{Kind: kind, Content: *c.Content}
		if c.MessageID != nil {
			out.MessageID = *c.MessageID
		}
		return out, nil
	case TypeToolCall:
		var t struct {
			ToolCall
			RawInput  json.RawMessage `json:"rawInput"`
			RawOutput json.RawMessage `json:"rawOutput"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return bad(err)
		}
		if t.ToolCallID == "" {
			return bad(errors.New("no toolCallId"))
		}
		out := t.ToolCall
		out.RawInput, out.RawOutput = raw(t.RawInput), raw(t.RawOutput)
		return out, nil
	case TypeToolCallUpdate:
		var t struct {
			ToolCallUpdate
			RawInput  json.RawMessage `json:"rawInput"`
			RawOutput json.RawMessage `json:"rawOutput"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return bad(err)
		}
		if t.ToolCallID == "" {
			return bad(errors.New("no toolCallId"))
		}
		out := t.ToolCallUpdate
		out.RawInput, out.RawOutput = raw(t.RawInput), raw(t.RawOutput)
		return out, nil
	case TypePlan:
		var p Plan
		if err := json.Unmarshal(data, &p); err != nil {
			return bad(err)
		}
		return p, nil
	default:
		return Other{Kind: kind, Raw: append(json.RawMessage(nil), data...)}, nil
	}
}

// raw returns v as an any: nil for absent or null, else the JSON.
func raw(v json.RawMessage) any {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// Publish publishes u to session as a session/update notification: event
// type u.Type(), payload {"sessionId": session, "update": u}. It returns
// what bus.Publish returns, with its errors (eventbus.ErrInvalid for a u
// without a kind, eventbus.ErrSessionClosed, eventbus.ErrClosed, …); opts
// are passed on.
func Publish(bus *eventbus.Bus, session string, u Update, opts ...eventbus.PublishOption) (eventbus.Event, error) {
	n := Notification{SessionID: session, Update: u}
	return bus.Publish(session, n.Type(), n, opts...)
}
