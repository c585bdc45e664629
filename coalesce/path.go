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
// missing or a value on the way is not an object.
func lookup(data []byte, path []string) (json.RawMessage, bool) {
	cur := json.RawMessage(data)
	for _, step := range path {
		if firstByte(cur) != '{' {
			return nil, false
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(cur, &m) != nil {
			return nil, false
		}
		v, ok := m[step]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
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
		var s string
		return json.Unmarshal(v, &s) == nil && s == want
	}
	return string(bytes.TrimSpace(v)) == want
}
