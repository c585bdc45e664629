package nats

import (
	"errors"
	"fmt"
	"strings"
)

// A session's events go to one subject that spells its place in the session
// tree: <prefix>.<root>.<child>…<session>, one token per session id, so that
// a descendants subscriber's sessions are the subject wildcard
// <prefix>.<root>.<child>.> plus the session's own subject.
//
// Session ids may hold anything a NATS token may not ('.', '*', '>', white
// space) and more (non-ASCII, '%'), so each id is escaped into a token:
// bytes in [A-Za-z0-9_-] stay, every other byte becomes %XX with two
// upper-case hex digits (percent-encoding, RFC 3986 style). The mapping is
// one-to-one: [unescapeToken] accepts exactly what [escapeToken] produces.

// escapeToken turns a session id into a valid, non-empty subject token.
func escapeToken(id string) string {
	n := 0
	for i := 0; i < len(id); i++ {
		if !plain(id[i]) {
			n++
		}
	}
	if n == 0 {
		return id
	}
	var sb strings.Builder
	sb.Grow(len(id) + 2*n)
	const hexdigits = "0123456789ABCDEF"
	for i := 0; i < len(id); i++ {
		c := id[i]
		if plain(c) {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(hexdigits[c>>4])
		sb.WriteByte(hexdigits[c&15])
	}
	return sb.String()
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

var errBadToken = errors.New("nats: subject token is not an escaped session id")

// unescapeToken reverses [escapeToken]. It refuses (errBadToken) an empty
// token, a byte that escapeToken would have escaped, lower-case hex, and an
// escape of a byte that needs none, so every session id has one token.
func unescapeToken(tok string) (string, error) {
	if tok == "" {
		return "", fmt.Errorf("%w: empty", errBadToken)
	}
	if !strings.Contains(tok, "%") {
		for i := 0; i < len(tok); i++ {
			if !plain(tok[i]) {
				return "", fmt.Errorf("%w: %q", errBadToken, tok)
			}
		}
		return tok, nil
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plain(c) {
			out = append(out, c)
			continue
		}
		if c != '%' || i+2 >= len(tok) {
			return "", fmt.Errorf("%w: %q", errBadToken, tok)
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("%w: %q", errBadToken, tok)
		}
		b := byte(hi<<4 | lo)
		if plain(b) {
			return "", fmt.Errorf("%w: %q escapes %q", errBadToken, tok, b)
		}
		out = append(out, b)
		i += 2
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// subjectFor is the subject of the session at the end of path (root first).
func subjectFor(prefix string, path []string) string {
	var sb strings.Builder
	n := len(prefix)
	for _, id := range path {
		n += 1 + len(id)
	}
	sb.Grow(n)
	sb.WriteString(prefix)
	for _, id := range path {
		sb.WriteByte('.')
		sb.WriteString(escapeToken(id))
	}
	return sb.String()
}

// pathOf reverses [subjectFor]: the tree path a subject under prefix spells.
func pathOf(prefix, subject string) ([]string, error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok || len(rest) < 2 || rest[0] != '.' {
		return nil, fmt.Errorf("nats: subject %q is not under %q", subject, prefix)
	}
	toks := strings.Split(rest[1:], ".")
	path := make([]string, len(toks))
	for i, tok := range toks {
		id, err := unescapeToken(tok)
		if err != nil {
			return nil, err
		}
		path[i] = id
	}
	return path, nil
}

// checkPrefix accepts a subject prefix of one or more non-empty tokens
// without wildcards, white space or control characters.
func checkPrefix(p string) error {
	if p == "" {
		return fmt.Errorf("nats: empty subject prefix")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return fmt.Errorf("nats: subject prefix %q: empty or wildcard token", p)
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c == 0x7f || c == '*' || c == '>' {
				return fmt.Errorf("nats: subject prefix %q: character %q not allowed", p, c)
			}
		}
	}
	return nil
}

// checkStreamName accepts a JetStream stream name: 1–64 characters from
// [A-Za-z0-9_-].
func checkStreamName(n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("nats: stream name %q must be 1-64 characters", n)
	}
	for i := 0; i < len(n); i++ {
		if !plain(n[i]) {
			return fmt.Errorf("nats: stream name %q: character %q not in [A-Za-z0-9_-]", n, n[i])
		}
	}
	return nil
}
