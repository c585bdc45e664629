package eventbus

import (
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

	"github.com/replaybus/replaybus/internal/textutil"
)

// validJSON reports whether data is exactly one JSON value (surrounding
// white space allowed) in UTF-8. The grammar is encoding/json's json.Valid:
// raw control characters in strings refused, lone surrogate escapes
// accepted, a byte-order mark refused, nesting deeper than 10,000 refused.
// Unlike json.Valid it also refuses invalid UTF-8 anywhere, inside strings
// too: RFC 8259 §8.1 requires UTF-8, and such an event would go out on SSE
// and WebSocket as text that is not UTF-8, which makes a browser fail the
// WebSocket connection (RFC 6455 §8.1) on every replay of it. It is the one
// check of every JSON payload the bus takes (Publish with a
// json.RawMessage, PublishJSON, PublishBytes under application/json,
// SendTo, a backend's Publish, a snapshot provider's state); [invalidJSON]
// words its refusal.
//
// The check is utf8.Valid then github.com/goccy/go-json's Valid: the
// latter about 5× faster than encoding/json's on the 256-byte agent
// payload and 9× at 4 and 64 KiB (docs/benchmarks.md, "JSON validation"),
// and of the validators measured the only one with encoding/json's answer
// on every input, the nesting limit included. TestValidJSON and
// FuzzValidAgreesWithEncodingJSON hold it to encoding/json's answer on
// UTF-8 input. No allocation; safe for concurrent use.
func validJSON(data []byte) bool {
	return utf8.Valid(data) && gojson.Valid(data)
}

// invalidJSON is the ErrInvalid error for data that validJSON refused:
// "data is not valid JSON<context>", then the offset of the first byte that
// is not UTF-8 when there is one, then the value quoted (cut to 60 bytes).
func invalidJSON(context string, data []byte) error {
	if at := textutil.InvalidUTF8At(data); at < len(data) {
		return invalidf("data is not valid JSON%s: not UTF-8 at byte %d (0x%02x): %.60q", context, at, data[at], data)
	}
	return invalidf("data is not valid JSON%s: %.60q", context, data)
}
