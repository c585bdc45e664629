package durable

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
)

// idDigits is the width of an offset's id part: every id up to 2^53−1
// (adapters/resume's MaxID, the largest a browser keeps exact) fits in 16
// decimal digits, so zero-padded ids sort as strings as they do as
// numbers. It is also the width of the reference server's offset halves,
// whose zero offset the conformance suite writes by hand.
const idDigits = 16

// OffsetError reports a Durable Streams offset that does not parse. Value
// is the offset as received; Error quotes it, cut to 64 bytes.
type OffsetError struct {
	Value  string // the rejected offset
	Reason string // what is wrong with it
}

// Error reads "durable: invalid offset "<value>": <reason>", the value
// quoted and cut to 64 bytes as every answer quotes a client's value.
func (e *OffsetError) Error() string {
	return fmt.Sprintf("durable: invalid offset %s: %s", quote(e.Value), e.Reason)
}

// FormatOffset returns the Durable Streams offset of bus position p: the
// point just after event p.ID of epoch p.Epoch. It is
// "<epoch>_<id as 16 zero-padded decimal digits>", so offsets of one epoch
// sort as strings exactly as their ids sort as numbers (PROTOCOL.md §8:
// opaque, lexicographically sortable, strictly increasing) — for ids up to
// 9,999,999,999,999,999; a larger id is written with all its digits and
// sorts after them only by length. An epoch made
// only of URL-safe characters (A–Z a–z 0–9 - . ~, as the bus's default 16
// hex digits are) is written as is; any other epoch is written as "~" and
// its unpadded base64url form, so an offset never holds , & = ? / or a
// space. The same position is the SSE adapter's epoch-qualified id
// "<epoch>-<id>" (adapters/resume's FormatID, which the SSE and WebSocket routes write): the two translate one to one,
// so a client can switch between the routes and resume. It never
// returns "-1" or "now", the protocol's sentinels. Pure; safe for
// concurrent use.
func FormatOffset(p eventbus.Position) string {
	var b strings.Builder
	b.Grow(len(p.Epoch) + 1 + idDigits + 2)
	if plainEpoch(p.Epoch) {
		b.WriteString(p.Epoch)
	} else {
		b.WriteByte('~')
		b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(p.Epoch)))
	}
	b.WriteByte('_')
	s := strconv.FormatUint(p.ID, 10)
	for i := len(s); i < idDigits; i++ {
		b.WriteByte('0')
	}
	b.WriteString(s)
	return b.String()
}

// ParseOffset is FormatOffset's inverse: it returns the bus position an
// offset names. It accepts exactly what FormatOffset writes (the epoch is
// the part before the last '_'; the id is 16 to 20 decimal digits) and
// returns an *OffsetError naming the value for anything else, including
// the sentinels "-1" and "now", which the handler resolves itself. Pure;
// safe for concurrent use.
func ParseOffset(s string) (eventbus.Position, error) {
	i := strings.LastIndexByte(s, '_')
	if i < 0 {
		return eventbus.Position{}, &OffsetError{Value: s, Reason: "want <epoch>_<16 digits>"}
	}
	ep, digits := s[:i], s[i+1:]
	if len(digits) < idDigits || len(digits) > 20 || len(digits) > idDigits && digits[0] == '0' {
		return eventbus.Position{}, &OffsetError{Value: s, Reason: fmt.Sprintf("id part has %d characters, want %d digits", len(digits), idDigits)}
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || strings.ContainsAny(digits, "+-") {
		return eventbus.Position{}, &OffsetError{Value: s, Reason: "id part is not decimal digits"}
	}
	switch {
	case ep == "":
		return eventbus.Position{}, &OffsetError{Value: s, Reason: "empty epoch"}
	case ep[0] == '~':
		raw, err := base64.RawURLEncoding.DecodeString(ep[1:])
		if err != nil || len(raw) == 0 || plainEpoch(string(raw)) {
			return eventbus.Position{}, &OffsetError{Value: s, Reason: "epoch is not the encoded form FormatOffset writes"}
		}
		ep = string(raw)
	case !urlSafe(ep):
		return eventbus.Position{}, &OffsetError{Value: s, Reason: "epoch has a character outside A-Z a-z 0-9 - . ~"}
	}
	return eventbus.Position{ID: id, Epoch: ep}, nil
}

// urlSafe reports whether s is non-empty and made only of A–Z a–z 0–9 - . ~
// (RFC 3986's unreserved characters without '_', which separates the id).
func urlSafe(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}

// plainEpoch reports whether epoch is written into an offset as is:
// URL-safe and not starting with '~', the mark of the encoded form.
func plainEpoch(epoch string) bool { return urlSafe(epoch) && epoch[0] != '~' }
