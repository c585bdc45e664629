package codec

import (
	"encoding/json"

	"github.com/replaybus/replaybus/eventbus"
)

// The turn lifecycle event types.
const (
	TypeTurnStart = "turn_start"
	TypeTurnEnd   = "turn_end"
)

// Turns decodes the turn lifecycle events:
//
//	turn_start {"turn", "session"}                  Start
//	turn_end   {"turn", "reason", "message"?}       Finish with that reason and message
//
// "turn" may be a string or a number. A turn_end without "reason" but
// with an ACP "stopReason" (as the example server's demo publishes it)
// finishes cancelled for "cancelled" and complete for any other.
var Turns Decoder = DecoderFunc(decodeTurn)

func decodeTurn(dst []Part, ev eventbus.Event) ([]Part, bool) {
	if ev.Type != TypeTurnStart && ev.Type != TypeTurnEnd || !ev.IsJSON() {
		return dst, false
	}
	var t struct {
		Turn       json.RawMessage `json:"turn"`
		Reason     string          `json:"reason"`
		StopReason string          `json:"stopReason"`
		Message    string          `json:"message"`
	}
	if json.Unmarshal(ev.Data, &t) != nil {
		return dst, false
	}
	p := part(Start, ev)
	var s string
	var n json.Number
	switch {
	case json.Unmarshal(t.Turn, &s) == nil:
		p.Turn = s
	case json.Unmarshal(t.Turn, &n) == nil:
		p.Turn = n.String()
	}
	if ev.Type == TypeTurnStart {
		return append(dst, p), true
	}
	p.Kind, p.Reason, p.Text = Finish, t.Reason, t.Message
	switch {
	case p.Reason != "":
	case t.StopReason == "cancelled":
		p.Reason = ReasonCancelled
	default:
		p.Reason = ReasonComplete
	}
	return append(dst, p), true
}
