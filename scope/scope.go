package scope

import (
	"fmt"
	"strconv"
)

// Kind is a subscription scope. The zero value is [Session].
type Kind uint8

// The scope kinds, as AgentPool names them.
const (
	// Session delivers the events of the subscribed session only.
	Session Kind = iota
	// Descendants delivers the subscribed session's events and those of
	// every session below it, including sessions created later.
	Descendants
	// Subtree delivers the subscribed session's events and those of its
	// parent and its siblings (AgentPool's definition of "subtree").
	Subtree
	// All delivers the events of every session of the bus.
	All
)

var names = [...]string{Session: "session", Descendants: "descendants", Subtree: "subtree", All: "all"}

// String returns the scope's wire name: "session", "descendants", "subtree"
// or "all"; an out-of-range value prints as "scope(N)".
func (k Kind) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return "scope(" + strconv.Itoa(int(k)) + ")"
}

// Valid reports whether k is one of the four defined kinds.
func (k Kind) Valid() bool { return int(k) < len(names) }

// Parse returns the Kind with the given wire name. It accepts exactly
// "session", "descendants", "subtree" and "all" (case-sensitive, no
// surrounding space); anything else, the empty string included, is an error
// that quotes the value.
func Parse(s string) (Kind, error) {
	for k, n := range names {
		if s == n {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("scope: unknown scope %q (want session, descendants, subtree or all)", s)
}

// MarshalText implements encoding.TextMarshaler with the wire name.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("scope: invalid scope %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [Parse], so a Kind
// can be read from JSON or an environment variable.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}
