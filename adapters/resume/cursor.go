package resume

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// MaxID is the largest event id a cursor may name: 2^53−1, the largest
// integer a browser's JSON.parse keeps exact, so every id the bus hands out
// survives the envelope's "id" in JavaScript. A cursor above it is refused.
const MaxID = 1<<53 - 1

// MaxEpochLen is the longest epoch [ParseCursor] and [ParseEpoch] accept,
// the bound eventbus.Options.Epoch documents.
const MaxEpochLen = 64

// CursorError reports a Last-Event-ID that is not a valid cursor. Value is
// the value as received; Error quotes it (cut to 64 bytes).
type CursorError struct {
	Value  string // the rejected value
	Reason string // what is wrong with it
}

// Error names the value, quoted and cut to 64 bytes, and what is wrong.
func (e *CursorError) Error() string { return "resume: " + e.message() }

// message is Error without the package prefix: what an HTTP answer says.
func (e *CursorError) message() string {
	return fmt.Sprintf("invalid Last-Event-ID %s: %s", quote(e.Value), e.Reason)
}

// ParseCursor parses a Last-Event-ID value strictly into the bus's cursor
// type, eventbus.Position (ID, Epoch). It accepts:
//
//   - "" — no cursor (nil, nil);
//   - decimal digits only, 0 … [MaxID], leading zeros allowed, at most 20
//     digits: no sign, no space, no "0x", no fraction, no exponent;
//   - "<epoch>-<seq>": a well-formed epoch (see [ParseEpoch]: 1–[MaxEpochLen]
//     bytes of UTF-8 without control characters, so hyphens and a UUID are
//     fine), a '-', and a seq as above (the form [FormatID] writes for
//     epoch-qualified ids). The last '-' separates the two. An epoch that is
//     not the bus's is another incarnation's: the handler answers it with
//     an epoch_reset frame, not an error.
//
// Anything else — "abc", "-1", "1.5", "0x3", " 7", "+7", "7 ", a value over
// MaxID or over the uint64 range, NUL, CR or LF anywhere, an epoch over
// MaxEpochLen bytes — is a [*CursorError] naming the value; the handlers
// answer it with 400 invalid_last_event_id (docs/protocol.md says why a bad
// cursor is never ignored).
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
	seq, reason := parseSeq(seqPart, len(s)-len(seqPart))
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
func (e *EpochError) Error() string { return "resume: " + e.message() }

// message is Error without the package prefix: what an HTTP answer says.
func (e *EpochError) message() string {
	return fmt.Sprintf("invalid X-Event-Epoch %s: %s", quote(e.Value), e.Reason)
}

// ParseEpoch checks an X-Event-Epoch request header value: "" (none) or an
// epoch of 1–[MaxEpochLen] bytes of valid UTF-8 without control characters.
// Only a malformed value — over-long, invalid UTF-8, a control character
// (NUL, CR, LF, DEL, …) — is an [*EpochError] naming the value. Any
// well-formed value that is not the bus's epoch (one this bus never issued,
// a UUID with hyphens, another server's) is another incarnation's epoch: the
// handler answers it with an epoch_reset frame, not with 400.
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
		return fmt.Sprintf("longer than %d bytes", MaxEpochLen)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("control character %s at byte %d", runeAt(s, i), i)
		}
	}
	return ""
}

// busEpoch returns what to hand the bus as SubscribeOptions.Cursor.Epoch for a
// well-formed epoch the client sent: the epoch itself when the bus could
// have issued it, else a stand-in the bus accepts and that differs from its
// own epoch, so that a foreign epoch (a UUID, say) is an epoch_reset.
func busEpoch(epoch, own string) string {
	if epoch == "" || epoch == own {
		return epoch
	}
	for i := 0; i < len(epoch); i++ {
		c := epoch[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			if own == "foreign" {
				return "foreign_"
			}
			return "foreign"
		}
	}
	return epoch
}

// runeAt quotes the character that starts at byte i of s: a whole rune
// ('٣', not the 'Ù' of its first byte), or its byte as '\xd9' when s is
// not valid UTF-8 there.
func runeAt(s string, i int) string {
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n <= 1 {
		if i >= len(s) {
			return "end of input"
		}
		return fmt.Sprintf("'\\x%02x'", s[i])
	}
	return strconv.QuoteRune(r)
}

// parseSeq parses 1–20 decimal digits no greater than MaxID. s starts at
// byte at of the value the reason describes (the seq after an epoch), so
// that a reason's byte offset points into that value.
func parseSeq(s string, at int) (uint64, string) {
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
			return 0, fmt.Sprintf("want decimal digits only, got %s at byte %d", runeAt(s, i), at+i)
		}
		d := uint64(c - '0')
		if n > (MaxID-d)/10 {
			return 0, fmt.Sprintf("over the id range (max %d)", uint64(MaxID))
		}
		n = n*10 + d
	}
	return n, ""
}

// quote quotes s for an answer, cut to 64 bytes at a rune boundary (see
// textutil.Quote), so an error never echoes a huge header.
func quote(s string) string { return textutil.Quote(s, 64) }

// FormatID returns the cursor of a real event as a server writes it: the
// decimal seq, or "<epoch>-<seq>" when epoch is non-empty (CR, LF and NUL
// are left out of the epoch). [ParseCursor] reads both forms back.
func FormatID(seq uint64, epoch string) string { return string(AppendID(nil, seq, epoch)) }

// AppendID appends [FormatID]'s form of seq and epoch to dst.
func AppendID(dst []byte, seq uint64, epoch string) []byte {
	if epoch != "" {
		if strings.ContainsAny(epoch, "\r\n\x00") {
			for i := 0; i < len(epoch); i++ {
				if c := epoch[i]; c != '\r' && c != '\n' && c != 0 {
					dst = append(dst, c)
				}
			}
		} else {
			dst = append(dst, epoch...)
		}
		dst = append(dst, '-')
	}
	return strconv.AppendUint(dst, seq, 10)
}
