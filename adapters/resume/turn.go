package resume

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Codes of the turn and presence parts of the wire (docs/protocol.md,
// "Turns"); the bus's turn errors are rows of the one table in codes.go.
const (
	CodeInvalidClient   = "invalid_client"   // 400: ?client= is not a client id (the rules of a session id)
	CodeInvalidPresence = "invalid_presence" // 400: ?presence= not 0 or 1
	CodeInvalidTurnID   = "invalid_turn_id"  // 400: a cancel's "turn" is not a turn id (the rules of a session id)
	CodeInvalidJSON     = "invalid_json"     // 400: a body or message that is not the JSON object the route takes
)

// parsePresence reads ?client= (eventbus.SubscribeOptions.Client: the
// client id the subscriber attaches as, for presence) and ?presence=1
// (SubscribeOptions.Presence: presence frames, a snapshot first).
func parsePresence(q url.Values, o *eventbus.SubscribeOptions) error {
	if c, ok := q["client"]; ok {
		// The check Subscribe makes; an explicit empty id is a client's
		// bug (an unset variable), not an anonymous subscriber.
		if err := frame.CheckName("client id", c[0]); err != nil {
			return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidClient, Message: "invalid client: " + err.Error()}
		}
		o.Client = c[0]
	}
	switch v := q.Get("presence"); v {
	case "", "0":
	case "1":
		o.Presence = true
	default:
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidPresence,
			Message: "invalid presence " + quote(v) + " (want 0 or 1)"}
	}
	return nil
}

// CancelRequest is a client's cancel: the body of POST
// /session/{id}/cancel and the WebSocket message {"type":"cancel",…}.
// Turn names the turn to cancel ("" every active turn of the session);
// Cascade also cancels every active turn of the session's descendants.
type CancelRequest struct {
	Turn    string `json:"turn,omitempty"`
	Cascade bool   `json:"cascade,omitempty"`
}

// ParseCancel parses a cancel request strictly: one JSON object whose
// members are "turn" (a string, or null for none), "cascade" (a boolean or
// null) and "type" (only "cancel": the WebSocket message's, accepted on
// every wire so that one object serves both), each at most once, spelled
// exactly; an empty or blank b is {}. A turn that is not a turn id (the
// rules of a session id: frame.CheckName) is a 400 invalid_turn_id
// [*StatusError] quoting it; anything else wrong — not UTF-8, not an
// object, another member, a wrong type, trailing data — a 400
// invalid_json naming what and where. Safe for concurrent use.
func ParseCancel(b []byte) (CancelRequest, error) {
	var c CancelRequest
	bad := func(format string, args ...any) (CancelRequest, error) {
		return CancelRequest{}, &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: fmt.Sprintf(format, args...)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return c, nil
	}
	if !utf8.Valid(b) {
		i := textutil.InvalidUTF8At(b)
		return bad("invalid UTF-8 at byte %d (byte 0x%02x)", i, b[i])
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad("want a JSON object {\"turn\"?, \"cascade\"?}, got %s", textutil.Quote(string(b), 48))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("invalid JSON at byte %d: %s", dec.InputOffset(), textutil.PublicMessage(err))
		}
		name, _ := tok.(string)
		if seen[name] {
			return bad("member %s given twice", quote(name))
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad("invalid JSON in %s at byte %d: %s", quote(name), dec.InputOffset(), textutil.PublicMessage(err))
		}
		switch name {
		case "turn":
			if string(v) == "null" {
				continue
			}
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &c.Turn) != nil {
				return bad("\"turn\" must be a string, got %s", textutil.Quote(string(v), 48))
			}
			if err := frame.CheckName("turn id", c.Turn); err != nil {
				return CancelRequest{}, &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidTurnID, Message: "invalid turn: " + err.Error()}
			}
		case "cascade":
			if string(v) == "null" {
				continue
			}
			if json.Unmarshal(v, &c.Cascade) != nil {
				return bad("\"cascade\" must be true or false, got %s", textutil.Quote(string(v), 48))
			}
		case "type":
			var typ string
			if json.Unmarshal(v, &typ) != nil || typ != "cancel" {
				return bad("\"type\" must be \"cancel\", got %s", textutil.Quote(string(v), 48))
			}
		default:
			return bad("unknown member %s (want turn, cascade)", quote(name))
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return bad("invalid JSON at byte %d: %s", dec.InputOffset(), textutil.PublicMessage(err))
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return bad("trailing data after the JSON object at byte %d", dec.InputOffset())
	}
	return c, nil
}

// Data is the request as the bus takes it ([eventbus.Bus.Cancel]), with by
// as who asked ("" for nobody named).
func (c CancelRequest) Data(by string) frame.TurnData {
	return frame.TurnData{Turn: c.Turn, Cascade: c.Cascade, By: by}
}
