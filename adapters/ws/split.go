package ws

import (
	"bytes"
	"fmt"
)

// SplitBatch splits one batched message (see [SubprotocolBatch]), a JSON
// array of envelopes, into its elements, appending them to dst (which may
// be nil) as sub-slices of msg, in order. It checks the array's structure:
// the brackets, at least one element, each element an object whose
// strings are terminated and whose brackets balance, a comma between two
// elements and nothing after the array but JSON whitespace. It does not
// check each element's grammar: decode each with [DecodeFrame], which
// does (ws.Client does both). Bad input is an error naming the byte offset
// and the bytes there (quoted, cut); it never panics. Safe for concurrent
// use.
func SplitBatch(msg []byte, dst [][]byte) ([][]byte, error) {
	bad := func(i int, format string, args ...any) error {
		return fmt.Errorf("ws: malformed batch at byte %d (%s): %s", i, quoteCut(string(msg[min(i, len(msg)):])), fmt.Sprintf(format, args...))
	}
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '[' {
		return dst, bad(i, "want a JSON array of envelopes")
	}
	i = skipSpace(msg, i+1)
	if i < len(msg) && msg[i] == ']' {
		return dst, bad(i, "an empty batch")
	}
	for {
		if i >= len(msg) || msg[i] != '{' {
			return dst, bad(i, "want an envelope (a JSON object)")
		}
		end, err := objectEnd(msg, i)
		if err != nil {
			return dst, bad(end, "%s", err)
		}
		dst = append(dst, msg[i:end])
		i = skipSpace(msg, end)
		switch {
		case i >= len(msg):
			return dst, bad(i, "the array is not closed")
		case msg[i] == ',':
			i = skipSpace(msg, i+1)
			continue
		case msg[i] == ']':
			if j := skipSpace(msg, i+1); j < len(msg) {
				return dst, bad(j, "trailing data after the array")
			}
			return dst, nil
		}
		return dst, bad(i, "want ',' or ']' after an envelope")
	}
}

// objectEnd returns the offset just past the object that starts at
// msg[start] ('{'): where its brackets balance again, strings skipped.
func objectEnd(msg []byte, start int) (int, error) {
	depth := 0
	for i := start; i < len(msg); i++ {
		switch msg[i] {
		case '"':
			j, ok := stringEnd(msg, i+1)
			if !ok {
				return i, fmt.Errorf("unterminated string")
			}
			i = j
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return len(msg), fmt.Errorf("unterminated envelope")
}

// stringEnd returns the offset of the quote closing the string whose
// content starts at msg[i].
func stringEnd(msg []byte, i int) (int, bool) {
	for {
		k := bytes.IndexByte(msg[i:], '"')
		if k < 0 {
			return 0, false
		}
		q := i + k
		bs := 0
		for p := q - 1; p >= i && msg[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q, true
		}
		i = q + 1
	}
}

// skipSpace returns the offset of the first byte from i that is not JSON
// whitespace.
func skipSpace(msg []byte, i int) int {
	for i < len(msg) && (msg[i] == ' ' || msg[i] == '\t' || msg[i] == '\n' || msg[i] == '\r') {
		i++
	}
	return i
}
