package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// checkMembers refuses what encoding/json accepts silently in a request
// body's top-level object: a member given twice (the last one won) and a
// member whose name matches a field of v only case-insensitively
// ({"type":"x","TYPE":"y"} published type "y"). Either let the server act
// on a value that a proxy, a gateway rule or a log reading the same body
// would not see. It returns "" when the members are fine or the body does
// not tokenize (the decode that follows then names the syntax error).
// v is a pointer to a struct with json tags.
func checkMembers(body []byte, v any) string {
	names := jsonFieldNames(v)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := make(map[string]bool, len(names))
	for dec.More() {
		at := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Sprintf("invalid JSON at byte %d: member %s given twice", at, quote(key))
		}
		seen[key] = true
		if !names[key] {
			for n := range names {
				if strings.EqualFold(n, key) {
					return fmt.Sprintf("invalid JSON at byte %d: unknown field %s (member names are case-sensitive: want %q)", at, quote(key), n)
				}
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// jsonFieldNames lists the member names of the struct v points to.
func jsonFieldNames(v any) map[string]bool {
	names := map[string]bool{}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return names
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}
