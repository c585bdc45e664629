package frame

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest session id or event type a bus accepts, in
// bytes.
const MaxNameLen = 256

// maxTypes bounds a subscription's type filter (SubscribeOptions.Types,
// ?types=).
const maxTypes = 64

// CheckName returns nil when v is a name a bus accepts as a session id or
// an event type: 1 to [MaxNameLen] bytes of valid UTF-8 without control
// characters. Otherwise its error names what v is (what: "session id",
// "event type", "origin", …) and quotes v, for example
//
//	session id "a\n" contains control character '\n'
//
// eventbus.Bus.Publish, Subscribe, CreateSession and SendTo refuse a bad
// name with the same text after "eventbus: invalid argument: " (matching
// eventbus.ErrInvalid). Adapters and servers call it to refuse a bad id
// before they reach the bus. Safe for concurrent use.
func CheckName(what, v string) error {
	if v == "" {
		return errors.New("empty " + what)
	}
	if len(v) > MaxNameLen {
		return fmt.Errorf("%s %.40q… is %d bytes, longer than %d", what, v, len(v), MaxNameLen)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, v)
	}
	for _, c := range []byte(v) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s %q contains control character %q", what, v, c)
		}
	}
	return nil
}

// CheckTypes returns nil when types is a valid type filter
// (eventbus.SubscribeOptions.Types, the ?types= of adapters/sse and
// adapters/ws): at most 64 entries, each non-empty and free of white space
// and control characters. Otherwise its error names the bad entry, for
// example
//
//	Types: entry "a b" contains white space or a control character
//
// eventbus.Bus.Subscribe refuses a bad filter with the same text after
// "eventbus: invalid argument: " (matching eventbus.ErrInvalid). Adapters
// call it to refuse a request before subscribing. Safe for concurrent use.
func CheckTypes(types []string) error {
	const field = "Types" // the errors name the option's field
	if len(types) > maxTypes {
		return fmt.Errorf("%s: %d entries (want at most %d)", field, len(types), maxTypes)
	}
	for _, t := range types {
		switch {
		case t == "":
			return fmt.Errorf("%s: empty entry", field)
		case strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("%s: entry %q contains white space or a control character", field, t)
		}
	}
	return nil
}
