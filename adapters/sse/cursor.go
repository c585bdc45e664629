package sse

import (
	"fmt"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
)

// MaxID is the largest event id a cursor may name: 2^53−1, the largest
// integer a browser's JSON.parse keeps exact, so every id the bus hands out
// survives the envelope's "id" in JavaScript. A cursor above it is refused.
const MaxID = 1<<53 - 1

// MaxEpochLen is the longest epoch [ParseCursor] and [ParseEpoch] accept,
// the bound eventbus.WithEpoch documents.
const MaxEpochLen = 64

// CursorError reports a Last-Event-ID that is not a valid cursor. Value is
// the value as received; Error quotes it (cut to 64 bytes).
type CursorError struct {
	Value  string // the rejected value
	Reason string // what is wrong with it
}

// Error names the value, quoted and cut to 64 bytes, and what is wrong.
func (e *CursorError) Error() string {
	return fmt.Sprintf("sse: invalid Last-Event-ID %s: %s", quoteCut(e.Value), e.Reason)
}

// ParseCursor parses a Last-Event-ID value strictly into the bus's cursor
// type, ready for eventbus.SubscribeOptions.Cursor. It accepts:
//
//   - "" — no cursor (nil, nil);
//   - decimal digits only, 0 … [MaxID], leading zeros allowed, at most 20
//     digits: no sign, no space, no "0x", no fraction, no exponent;
//   - "<epoch>-<seq>": an epoch of 1–[MaxEpochLen] characters from
//     [A-Za-z0-9_], a '-', and a seq as above (the form [FormatID] writes
//     for epoch-qualified ids).
//
// Anything else — "abc", "-1", "1.5", "0x3", " 7", "+7", "7 ", a value over
// MaxID or over the uint64 range, NUL, CR or LF anywhere — is a
// [*CursorError] naming the value. Where qwen-code silently ignores a bad
// cursor (and so hides a gap), the handler answers 400.
func ParseCursor(s string) (*eventbus.Position, error) {
	if s == "" {
		return nil, nil
	}
	seqPart, epoch := s, ""
	if i := strings.LastIndexByte(s, '-'); i >= 0 {
		epoch, seqPart = s[:i], s[i+1:]
		if epoch == "" {
			return nil, &CursorError{Value: s, Reason: "want decimal digits only (no sign)"}
		}
		if err := checkEpoch(epoch); err != "" {
			return nil, &CursorError{Value: s, Reason: "epoch " + err}
		}
	}
	seq, reason := parseSeq(seqPart)
	if reason != "" {
		return nil, &CursorError{Value: s, Reason: reason}
	}
	return &eventbus.Position{ID: seq, Epoch: epoch}, nil
}

// EpochError reports an X-Event-Epoch value that is not a valid epoch.
type EpochError struct {
	Value  string // the rejected value
	Reason string // what is wrong with it
}

// Error names the value, quoted and cut to 64 bytes, and what is wrong.
func (e *EpochError) Error() string {
	return fmt.Sprintf("sse: invalid X-Event-Epoch %s: %s", quoteCut(e.Value), e.Reason)
}

// ParseEpoch checks an X-Event-Epoch request header value: "" (none) or
// 1–[MaxEpochLen] characters from [A-Za-z0-9_]. Anything else is an
// [*EpochError] naming the value. A well-formed epoch that is not the bus's
// is not an error here: the bus answers it with an epoch_reset frame.
func ParseEpoch(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if reason := checkEpoch(s); reason != "" {
		return "", &EpochError{Value: s, Reason: reason}
	}
	return s, nil
}

func checkEpoch(s string) string {
	if len(s) > MaxEpochLen {
		return fmt.Sprintf("longer than %d characters", MaxEpochLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Sprintf("has %q at byte %d (want [A-Za-z0-9_])", c, i)
		}
	}
	return ""
}

// parseSeq parses 1–20 decimal digits no greater than MaxID.
func parseSeq(s string) (uint64, string) {
	if s == "" {
		return 0, "want decimal digits, got nothing"
	}
	if len(s) > 20 {
		return 0, "too long (over 20 digits)"
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("want decimal digits only, got %q at byte %d", c, i)
		}
		d := uint64(c - '0')
		if n > (MaxID-d)/10 {
			return 0, fmt.Sprintf("over the id range (max %d)", uint64(MaxID))
		}
		n = n*10 + d
	}
	return n, ""
}

// quoteCut quotes s with %q, cutting it to 64 bytes first so an error never
// echoes a huge header.
func quoteCut(s string) string {
	const limit = 64
	if len(s) <= limit {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…(%d bytes)", s[:limit], len(s))
}
