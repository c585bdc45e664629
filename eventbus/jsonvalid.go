package eventbus

import gojson "github.com/goccy/go-json"

// validJSON reports whether data is exactly one JSON value (surrounding
// white space allowed), deciding every input as encoding/json's json.Valid
// does: the same grammar, raw control characters in strings refused, invalid
// UTF-8 and lone surrogate escapes accepted, a byte-order mark refused,
// nesting deeper than 10,000 refused. It is the one check of every JSON
// payload the bus takes (Publish with a json.RawMessage, PublishJSON,
// PublishBytes under application/json, SendTo, a backend's Publish, a
// snapshot provider's state).
//
// The check is github.com/goccy/go-json's Valid: about 5× faster than
// encoding/json's on the 256-byte agent payload and 9× at 4 and 64 KiB
// (docs/benchmarks.md, "JSON validation"), and of the validators measured
// the only one with encoding/json's answer on every input, the nesting
// limit included. TestValidJSON and FuzzValidAgreesWithEncodingJSON hold
// it to encoding/json's answer. No allocation; safe for concurrent use.
func validJSON(data []byte) bool {
	return gojson.Valid(data)
}
