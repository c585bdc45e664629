package textutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Quote quotes s as strconv.Quote does — non-ASCII as itself, invalid
// UTF-8 as \x escapes — cutting it first to limit bytes at a rune boundary
// and then saying how long it was: "abc…"(200 bytes). An answer thus never
// echoes a huge header, and a value that fits is quoted exactly.
func Quote(s string, limit int) string {
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > limit-utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// prefixes are the Go package names that [PublicMessage] drops from the
// front of an error's text.
var prefixes = []string{"eventbus", "sse", "ws", "resume", "durable", "scope", "replay", "nats", "config", "json", "url", "strconv", "http", "server"}

// PublicMessage is err's text for an HTTP answer: without the Go package
// prefixes ("eventbus: ", "json: ", …) that mean nothing to a client.
func PublicMessage(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, ": ")
		if i < 0 {
			return msg
		}
		known := false
		for _, p := range prefixes {
			known = known || msg[:i] == p
		}
		if !known {
			return msg
		}
		msg = msg[i+2:]
	}
}

// Distance is the edit distance between a and b in bytes: Levenshtein's,
// plus — when transpose is set — a swap of two neighbouring bytes counted
// as one edit (the optimal-string-alignment distance). It allocates only
// when b is over 64 bytes.
func Distance(a, b string, transpose bool) int {
	var small [3][65]int
	rows := [3][]int{small[0][:], small[1][:], small[2][:]}
	if len(b) > 64 {
		for i := range rows {
			rows[i] = make([]int, len(b)+1)
		}
	}
	prev2, prev, cur := rows[0], rows[1], rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if transpose && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// CheckHeader returns an error naming the first header of h (an
// http.Header) that no HTTP client can send: a name that is not an RFC 9110
// token, or a value with a control character other than a tab (a CR or LF
// read from a file, a NUL). nil when every header can be sent. The clients
// check their configured headers with it, since net/http refuses such a
// request before any network and a retry would never mend it.
func CheckHeader(h map[string][]string) error {
	for name, values := range h {
		if name == "" {
			return fmt.Errorf("empty header name")
		}
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return fmt.Errorf("header name %s: character %q is not allowed in a name", Quote(name, 64), name[i])
			}
		}
		for _, v := range values {
			for i := 0; i < len(v); i++ {
				if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
					return fmt.Errorf("header %s: value %s contains control character %q", name, Quote(v, 64), c)
				}
			}
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an RFC 9110 token (tchar).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// InvalidUTF8At returns the offset of the first byte of b that is not part
// of valid UTF-8, or len(b) when b is valid UTF-8: what an answer refusing
// a body names.
func InvalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

const hexDigits = "0123456789abcdef"

// MarshalJSON is json.Marshal without HTML escaping: '&', '<' and '>'
// are written as themselves (a JSON body or frame is not HTML), the rest
// as json.Marshal writes it; no newline after it. Every answer body the
// handlers write goes through it, so none reads \u0026 where the message
// said '&'. Its errors are json.Marshal's.
func MarshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// AppendJSONString appends s to dst as a JSON string the way encoding/json
// does with SetEscapeHTML(false): control characters escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped for JavaScript; so the result
// is always valid UTF-8. It allocates only to grow dst. The envelopes of
// adapters/resume and adapters/durable write their strings with it.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
