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
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return ""
		}
		if i := loneSurrogate(val); i >= 0 {
			return fmt.Sprintf("invalid JSON at byte %d: member %s has a lone UTF-16 surrogate escape %s (it would be read as U+FFFD)",
				dec.InputOffset()-int64(len(val))+int64(i), quote(key), val[i:i+6])
		}
	}
	return ""
}

// loneSurrogate returns the offset in a top-level JSON string value of a
// \uD800–\uDFFF escape that is not part of a high+low pair, or -1 (also
// for a value that is not a string: nested data is the publisher's own).
// encoding/json replaces such an escape with U+FFFD, so the id or type the
// server acts on would differ from the one in the body.
func loneSurrogate(v []byte) int {
	if len(v) == 0 || v[0] != '"' {
		return -1
	}
	surrogate := func(i int) (hi, lo bool) {
		if i+6 > len(v) || v[i] != '\\' || v[i+1] != 'u' {
			return false, false
		}
		var r rune
		for _, c := range v[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return false, false
			}
		}
		return r >= 0xD800 && r < 0xDC00, r >= 0xDC00 && r < 0xE000
	}
	for i := 1; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		hi, lo := surrogate(i)
		switch {
		case hi:
			if _, next := surrogate(i + 6); !next {
				return i
			}
			i += 11 // the pair
		case lo:
			return i
		default:
			i++ // the escaped character
		}
	}
	return -1
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
