package coalesce

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// splitPath splits a dot-separated object path; every step must be
// non-empty.
func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	parts := strings.Split(p, ".")
	for _, s := range parts {
		if s == "" {
			return nil, fmt.Errorf("empty step in %q", p)
		}
	}
	return parts, nil
}

// lookup returns the JSON value at path in data; ok is false when a step is
// missing or a value on the way is not an object. data must be valid JSON
// (the bus validated it at publish); it is scanned in place, without
// decoding or allocating.
func lookup(data []byte, path []string) (json.RawMessage, bool) {
	start, end, ok := lookupAt(data, path)
	if !ok {
		return nil, false
	}
	return data[start:end], true
}

// lookupAt is lookup that returns where the value lies: data[start:end].
func lookupAt(data []byte, path []string) (start, end int, ok bool) {
	end = len(data)
	for _, step := range path {
		s, e, ok := member(data[start:end], step)
		if !ok {
			return 0, 0, false
		}
		start, end = start+s, start+e
	}
	return start, end, true
}

// member returns where the value of key in the JSON object obj lies,
// obj[start:end] (the last one when the key repeats, as encoding/json
// decodes it).
func member(obj []byte, key string) (start, end int, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return start, end, ok
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return 0, 0, false
		}
		ks := i
		i = skipString(obj, i)
		k := obj[ks:i]
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(obj, i+1)
		vs := i
		i = skipValue(obj, i)
		if i < 0 {
			return 0, 0, false
		}
		if keyEquals(k, key) {
			start, end, ok = vs, i, true
		}
	}
}

// keyEquals compares a JSON string literal (with its quotes) with key.
func keyEquals(lit []byte, key string) bool {
	if bytes.IndexByte(lit, '\\') < 0 {
		return len(lit) == len(key)+2 && string(lit[1:len(lit)-1]) == key
	}
	var s string
	return json.Unmarshal(lit, &s) == nil && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just after the string literal at b[i]. It
// jumps from quote to quote (bytes.IndexByte) and looks for an escape only
// in the run before the quote it found.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		if bytes.IndexByte(b[i:i+j], '\\') < 0 {
			return i + j + 1
		}
		for ; i < len(b); i++ { // an escape before the quote: step through it
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	}
	return len(b)
}

// skipValue returns the index just after the JSON value at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// stringValue returns the text of a JSON string literal; the fast path
// (no escapes) does not decode.
func stringValue(lit []byte) (string, error) {
	if raw, ok := rawString(lit); ok {
		return string(raw), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// rawString returns the bytes between the quotes of a JSON string literal
// without escapes (they are its text); ok is false otherwise.
func rawString(lit []byte) ([]byte, bool) {
	if len(lit) >= 2 && lit[0] == '"' && lit[len(lit)-1] == '"' && bytes.IndexByte(lit, '\\') < 0 {
		return lit[1 : len(lit)-1], true
	}
	return nil, false
}

// setPath returns a copy of data with the value at path replaced by v. Each
// object on the way is re-encoded (keys in sorted order); a missing step or
// a value on the way that is not an object is an error.
func setPath(data []byte, path []string, v json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if firstByte(data) != '{' || json.Unmarshal(data, &m) != nil {
		return nil, fmt.Errorf("coalesce: not an object at %q", path[0])
	}
	if len(path) == 1 {
		m[path[0]] = v
	} else {
		child, ok := m[path[0]]
		if !ok {
			return nil, fmt.Errorf("coalesce: no %q", path[0])
		}
		nc, err := setPath(child, path[1:], v)
		if err != nil {
			return nil, err
		}
		m[path[0]] = nc
	}
	return json.Marshal(m)
}

// firstByte returns the first non-space byte of a JSON text, 0 when none.
func firstByte(v []byte) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func isNull(v []byte) bool { return string(bytes.TrimSpace(v)) == "null" }

// equals compares a JSON value with want: a string by its text, anything
// else by its compact encoding.
func equals(v json.RawMessage, want string) bool {
	if firstByte(v) == '"' {
		if lit := bytes.TrimSpace(v); bytes.IndexByte(lit, '\\') < 0 {
			return len(lit) >= 2 && string(lit[1:len(lit)-1]) == want // no allocation
		}
		s, err := stringValue(v)
		return err == nil && s == want
	}
	return string(bytes.TrimSpace(v)) == want
}
