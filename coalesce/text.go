package coalesce

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
)

// A compacting bus (eventbus.Options.ReplayCompact) stores a run of a
// Concat rule's events as their text (through the methods TextSpan and
// JoinText, which the bus looks for on its rule set): the store
// recognises the next event of the run by its bytes — equal to the run's
// payload outside the text's string literal — without calling Key. That
// holds when the key cannot depend on that literal's contents: the rule is
// a Concat without a Key function, and no When or KeyPaths path of a rule
// tried for its types before it (or of it) is the merge path or an object
// on the way to it (a Drop there sees a string either way; a path below
// it finds nothing either way). textSafe is computed by Compile.

// markTextSafe sets rule i's textSafe (after every rule is compiled).
func (s *Set) markTextSafe(i int) {
	r := &s.rules[i]
	if r.Merge.Op != Concat || r.Key != nil {
		return
	}
	reads := func(p []string) bool { return len(p) <= len(r.path) && slices.Equal(p, r.path[:len(p)]) }
	for _, t := range r.Types {
		for _, j := range s.byType[t] {
			if j > i {
				break
			}
			for _, c := range s.rules[j].when {
				if reads(c.path) {
					return
				}
			}
			for _, p := range s.rules[j].keyPaths {
				if reads(p) {
					return
				}
			}
		}
	}
	r.textSafe = true
}

// ruleOf returns the rule a key of this set names, or nil.
func (s *Set) ruleOf(key string) *rule {
	n, _, _ := strings.Cut(key, "\x1f")
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= len(s.rules) {
		return nil
	}
	return &s.rules[i]
}

// TextSpan is one of the two methods a compacting bus
// (eventbus.Options.ReplayCompact) looks for on its rule set: for a key of a Concat rule
// that no condition or key path of its type reads the merged string
// through, where data's string at Merge.Path lies (start < 0: null or
// absent, merged as ""). ok is false for every other key, and for data
// whose value there is not a string or null (not an event of key).
func (s *Set) TextSpan(key, typ string, data []byte) (start, end int, ok bool) {
	r := s.ruleOf(key)
	if r == nil || !r.textSafe || !slices.Contains(r.Types, typ) {
		return 0, 0, false
	}
	start, end, found := lookupAt(data, r.path)
	switch {
	case !found || isNull(data[start:end]):
		return -1, -1, true
	case data[start] == '"':
		return start, end, true
	}
	return 0, 0, false
}

// JoinText is the other (see TextSpan): Concat's merge of events
// whose texts are texts (each the contents of a JSON string literal) and
// whose first payload is first (outside the literal). A key that is not a
// Concat rule's is an error.
func (s *Set) JoinText(key string, first []byte, texts iter.Seq[[]byte]) (json.RawMessage, error) {
	r := s.ruleOf(key)
	if r == nil || r.Merge.Op != Concat {
		return nil, fmt.Errorf("coalesce: %s: not a Concat key of this set: %q", s.name, key)
	}
	// Joined before they are unescaped, as Merge does: a surrogate pair
	// whose \u escapes two texts split is one rune.
	lit := []byte{'"'}
	for t := range texts {
		lit = append(lit, t...)
	}
	str, err := stringValue(append(lit, '"'))
	if err != nil {
		return nil, fmt.Errorf("coalesce: %s: %s: %w", s.name, r.Merge.Path, err)
	}
	v, err := json.Marshal(str)
	if err != nil {
		return nil, err
	}
	return setPath(first, r.path, v)
}
