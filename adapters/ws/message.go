package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// MaxClientMessageBytes is the default bound on one client message
// ([HandlerOptions.ReadLimit]): the documented messages are a few hundred
// bytes at most. A longer one closes the connection with 1009.
const MaxClientMessageBytes = 4096

// ClientMessage is one parsed client → server message. Exactly one of its
// fields is set. The set is small and closed (docs/protocol.md):
//
//	{"resume": {"lastEventId": "42", "epoch": "9f…"}}   resume from a cursor (first message only)
//	{"resume": {}}                                     start without a cursor, now
//	{"ping": <any JSON value>}                         answered by a {"type":"pong","data":<the value>} frame
//	{"type": "cancel", "turn"?: …, "cascade"?: …}      a cancel, answered by a {"type":"cancel_result"} frame
type ClientMessage struct {
	// Resume is set for a resume message.
	Resume *Resume
	// Ping is the ping message's value (JSON, as sent; "null" for null),
	// set for a ping message.
	Ping json.RawMessage
	// Cancel is set for a cancel message; CancelErr instead when its turn
	// is not a turn id (a 400 invalid_turn_id *resume.StatusError, which
	// the handler answers, as POST /session/{id}/cancel does, without
	// closing the connection).
	Cancel    *resume.CancelRequest
	CancelErr error
}

// Resume is the body of a resume message: the cursor to resume from, as a
// reconnecting SSE client sends it in Last-Event-ID.
type Resume struct {
	// Cursor is the parsed lastEventId: a decimal id (JSON string or
	// number) or "<epoch>-<seq>"; nil when absent, null or "".
	Cursor *eventbus.Position
	// Epoch is the bus epoch the cursor came from (the "epoch" field, or
	// the epoch of an epoch-qualified lastEventId); "" when unknown.
	Epoch string
}

// MessageError is a client message that is not one of the documented ones;
// the handler closes the connection with 1008 and Reason (cut to fit a
// close frame).
type MessageError struct {
	Reason string // what is wrong, quoting the offending value (cut)
}

// Error reads "ws: invalid client message: <reason>".
func (e *MessageError) Error() string { return "ws: invalid client message: " + e.Reason }

func msgErr(format string, args ...any) error {
	return &MessageError{Reason: fmt.Sprintf(format, args...)}
}

// ParseClientMessage parses one client text message strictly: a JSON object
// with exactly one member, "resume" or "ping", or a cancel: an object with
// "type":"cancel" and the members of [resume.ParseCancel] ("turn",
// "cascade"). A resume's value is null or
// an object with only "lastEventId" (string, integer or null; the cursor
// rules of [resume.ParseCursor]: decimal digits up to 2^53−1, or
// "<epoch>-<seq>") and "epoch" (string or null, [resume.ParseEpoch]); an
// epoch-qualified lastEventId and an "epoch" that disagree are an error.
// Anything else — not JSON, not an object, trailing data, another or a
// second member, an unknown field, a fraction, a sign — is a
// [*MessageError] naming the problem. It never panics; safe for concurrent
// use.
func ParseClientMessage(b []byte) (ClientMessage, error) {
	var m ClientMessage
	if !utf8.Valid(b) {
		return m, msgErr("not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return m, msgErr("want a JSON object, got %s", quoteCut(string(b)))
	}
	fields, err := objectMembers(trimmed)
	if err != nil {
		return m, err
	}
	for _, f := range fields {
		if f.name == "type" {
			return parseTyped(trimmed)
		}
	}
	if len(fields) != 1 {
		names := make([]string, 0, len(fields))
		for _, f := range fields {
			names = append(names, quoteCut(f.name))
		}
		return m, msgErr("want exactly one of \"resume\", \"ping\"; got %d members (%s)", len(fields), strings.Join(names, ", "))
	}
	f := fields[0]
	switch f.name {
	case "ping":
		m.Ping = json.RawMessage(bytes.Clone(f.value))
		return m, nil
	case "resume":
		r, err := parseResume(f.value)
		if err != nil {
			return m, err
		}
		m.Resume = &r
		return m, nil
	}
	return m, msgErr("unknown message %s (want \"resume\", \"ping\" or {\"type\":\"cancel\"})", quoteCut(f.name))
}

// parseTyped parses a message with a "type" member: a cancel. A turn that
// is not a turn id is the message's CancelErr; anything else wrong a
// *MessageError.
func parseTyped(b []byte) (ClientMessage, error) {
	var m ClientMessage
	c, err := resume.ParseCancel(b)
	var se *resume.StatusError
	switch {
	case err == nil:
		m.Cancel = &c
	case errors.As(err, &se) && se.Code == resume.CodeInvalidTurnID:
		m.CancelErr = se
	case se != nil && strings.HasPrefix(se.Message, `"type" must be`):
		return m, msgErr("unknown message type %s (want \"cancel\")", typeValue(b))
	case se != nil:
		return m, msgErr("cancel: %s", se.Message)
	default:
		return m, msgErr("cancel: %v", err)
	}
	return m, nil
}

// typeValue quotes the "type" member of the object b (known to have one).
func typeValue(b []byte) string {
	var t struct {
		Type json.RawMessage `json:"type"`
	}
	_ = json.Unmarshal(b, &t)
	var s string
	if json.Unmarshal(t.Type, &s) == nil {
		return quoteCut(s)
	}
	return quoteCut(string(t.Type))
}

type member struct {
	name  string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members in order, keeping
// duplicates (so that {"ping":1,"ping":2} is refused, not merged).
func objectMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, msgErr("malformed JSON: %v", err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, msgErr("malformed JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, msgErr("malformed JSON: member name %v", tok)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, msgErr("malformed JSON in %s: %v", quoteCut(name), err)
		}
		out = append(out, member{name, v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, msgErr("malformed JSON: %v", err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return nil, msgErr("trailing data after the JSON object: %s", quoteCut(string(rest)))
	}
	return out, nil
}

func parseResume(v json.RawMessage) (Resume, error) {
	var r Resume
	if string(v) == "null" {
		return r, nil
	}
	if len(v) == 0 || v[0] != '{' {
		return r, msgErr("resume: want an object, got %s", quoteCut(string(v)))
	}
	fields, err := objectMembers(v)
	if err != nil {
		return r, err
	}
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.name] {
			return r, msgErr("resume: duplicate member %s", quoteCut(f.name))
		}
		seen[f.name] = true
		switch f.name {
		case "lastEventId":
			s, err := cursorText(f.value)
			if err != nil {
				return r, err
			}
			c, err := resume.ParseCursor(s)
			if err != nil {
				return r, msgErr("resume: lastEventId %s: %s", quoteCut(s), err.(*resume.CursorError).Reason)
			}
			r.Cursor = c
		case "epoch":
			if string(f.value) == "null" {
				continue
			}
			var s string
			if err := json.Unmarshal(f.value, &s); err != nil {
				return r, msgErr("resume: epoch must be a string, got %s", quoteCut(string(f.value)))
			}
			e, err := resume.ParseEpoch(s)
			if err != nil {
				return r, msgErr("resume: epoch %s: %s", quoteCut(s), err.(*resume.EpochError).Reason)
			}
			r.Epoch = e
		default:
			return r, msgErr("resume: unknown member %s (want lastEventId, epoch)", quoteCut(f.name))
		}
	}
	if r.Cursor != nil && r.Cursor.Epoch != "" {
		if r.Epoch != "" && r.Epoch != r.Cursor.Epoch {
			return r, msgErr("resume: epoch %q disagrees with the epoch %q of lastEventId", r.Epoch, r.Cursor.Epoch)
		}
		r.Epoch = r.Cursor.Epoch
	}
	return r, nil
}

// cursorText returns a lastEventId value as the text ParseCursor reads: a
// string's content, an integer's digits, "" for null.
func cursorText(v json.RawMessage) (string, error) {
	switch {
	case string(v) == "null":
		return "", nil
	case len(v) > 0 && v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", msgErr("resume: lastEventId: %v", err)
		}
		return s, nil
	case len(v) > 0 && v[0] >= '0' && v[0] <= '9':
		return string(v), nil // digits only, or ParseCursor names the bad byte
	}
	return "", msgErr("resume: lastEventId must be a string or a non-negative integer, got %s", quoteCut(string(v)))
}

// quoteCut quotes s, cut to 48 bytes at a rune boundary (textutil.Quote),
// so that a reason names the bad value and still fits a close frame.
func quoteCut(s string) string { return textutil.Quote(s, 48) }

// closeReason cuts s to the 123 bytes a close frame's reason may hold,
// at a UTF-8 boundary.
func closeReason(s string) string {
	const limit = 123
	if len(s) <= limit {
		return s
	}
	s = s[:limit-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
