package coalesce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
)

// Op says how a run of events with one merge key becomes one event.
type Op uint8

// The merge operations (AgentPool's _merge_* helpers, as data).
const (
	// Concat concatenates the JSON strings at Merge.Path (null or absent
	// counts as ""); the rest of the payload is the FIRST event's
	// (AgentPool: "index of the first"). An event whose value there is
	// neither a string nor null is not merged. The strings are joined
	// before they are unescaped: a surrogate pair whose \u escapes two
	// events split is one character.
	Concat Op = iota + 1
	// Append concatenates the JSON arrays at Merge.Path in order (null or
	// absent counts as empty; duplicates are kept); the rest of the payload
	// is the LAST event's (AgentPool's _merge_progress_events). When no
	// event has the field the result has none either. An event whose value
	// there is neither an array nor null is not merged.
	Append
	// Last keeps the last event's payload (AgentPool's plan: last wins).
	Last
	// Custom calls Merge.Func.
	Custom
)

// String returns the operation's name ("concat", "append", "last", "custom").
func (o Op) String() string {
	switch o {
	case Concat:
		return "concat"
	case Append:
		return "append"
	case Last:
		return "last"
	case Custom:
		return "custom"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Merge is how a [Rule] merges a run of events.
type Merge struct {
	// Op is the operation; required.
	Op Op
	// Path is the dot-separated object path of the field Concat and Append
	// work on, e.g. "update.content.text"; required for them, unused
	// otherwise.
	Path string
	// Func merges evs (two or more consecutive events with one key, oldest
	// first) into one payload; required for Custom, unused otherwise. It
	// must not modify the events' Data; an error delivers them unmerged.
	Func func(evs []eventbus.Event) (json.RawMessage, error)
}

// Rule says which events merge and how: the events of Types whose payload
// meets When are merged per key (Group, the event type and the values at
// KeyPaths, or what Key returns) with Merge. Rules are plain values: copy a
// rule set's Rules, add your own and [Compile] them.
type Rule struct {
	// Types are the event types (eventbus.Event.Type) the rule applies to;
	// at least one.
	Types []string
	// When maps payload paths to the value they must hold for the rule to
	// apply: a JSON string is compared by its text, anything else by its
	// JSON encoding ("true", "3"). A missing path fails the condition.
	When map[string]string
	// Group names the merge group in keys (AgentPool's "delta_text",
	// "progress", …); it defaults to the rule's position.
	Group string
	// KeyPaths are payload paths whose values are part of the merge key,
	// e.g. a tool call id and status: events that differ there never
	// merge. A missing value counts as null.
	KeyPaths []string
	// Key, when set, computes the key part instead of KeyPaths from the
	// payload; ok false passes the event through unmerged.
	Key func(data json.RawMessage) (key string, ok bool)
	// Merge is how a run of events becomes one.
	Merge Merge
}

// Drop drops the events of Type whose payload holds JSON null at Path
// (AgentPool drops a PartDeltaEvent whose delta is None). Only an explicit
// null drops: a payload without the field, or one that is not an object on
// the way to it, is an unexpected shape and passes through unmerged, so
// that nothing vanishes from a coalesced stream.
type Drop struct {
	Type string // event type
	Path string // dot-separated object path
}

// RuleSet is a named, uncompiled set of rules: a value that can be copied
// and extended. [Compile] turns it into a [Set].
type RuleSet struct {
	// Name identifies the set, e.g. "acp".
	Name string
	// Rules are tried in order for an event's type; the first whose When
	// holds applies. Events no rule applies to pass through unmerged.
	Rules []Rule
	// Drops list the events that are dropped as empty.
	Drops []Drop
	// Immediate lists lifecycle event types that always pass through and
	// end the run before them (AgentPool's _is_immediate); a rule naming
	// one of them is refused.
	Immediate []string
}

// Set is a compiled [RuleSet]. It implements [eventbus.Coalescer]: pass it
// as eventbus.SubscribeOptions.Coalesce. A Set is immutable and safe for
// concurrent use by any number of subscriptions.
type Set struct {
	name      string
	byType    map[string][]int // event type → indexes into rules
	rules     []rule
	drops     map[string][][]string
	immediate map[string]bool
}

type rule struct {
	Rule
	group    string
	when     []cond
	keyPaths [][]string
	path     []string // Merge.Path
	// base is the common prefix of the paths applies reads (When's, and
	// Merge.Path for Concat and Append), looked up once per event; the
	// conditions' rest and pathRest continue from it.
	base     []string
	pathRest []string
	prefix   map[string]string // event type → "<rule>\x1f<group>\x1f<type>"
	textSafe bool              // its keys fold as text in a compacting bus (text.go)
}

type cond struct {
	path []string
	rest []string // path after the rule's base
	want string
}

// ErrInvalidRule reports a rule set that cannot be compiled; the wrapping
// error names the rule and the bad value.
var ErrInvalidRule = errors.New("coalesce: invalid rule")

// Compile checks rs and returns it as a [Set]. Errors (ErrInvalidRule,
// naming the rule by index and the bad value): a rule without types, an
// empty type or path, an unknown Op, Concat or Append without Path, Custom
// without Func, a rule for an Immediate type.
func Compile(rs RuleSet) (*Set, error) {
	bad := func(format string, args ...any) (*Set, error) {
		return nil, fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidRule, quote(rs.Name)}, args...)...)
	}
	s := &Set{name: rs.Name, byType: map[string][]int{}, drops: map[string][][]string{}, immediate: map[string]bool{}}
	for _, t := range rs.Immediate {
		if t == "" {
			return bad("empty Immediate type")
		}
		s.immediate[t] = true
	}
	for i, d := range rs.Drops {
		p, err := splitPath(d.Path)
		if d.Type == "" || err != nil {
			return bad("drop %d: type %s path %s", i, quote(d.Type), quote(d.Path))
		}
		s.drops[d.Type] = append(s.drops[d.Type], p)
	}
	for i, r := range rs.Rules {
		c := rule{Rule: r, group: r.Group}
		if c.group == "" {
			c.group = "rule" + strconv.Itoa(i)
		}
		if len(r.Types) == 0 {
			return bad("rule %d (%s): no Types", i, c.group)
		}
		for _, t := range r.Types {
			if t == "" {
				return bad("rule %d (%s): empty type", i, c.group)
			}
			if s.immediate[t] {
				return bad("rule %d (%s): type %s is Immediate", i, c.group, quote(t))
			}
		}
		for p, want := range r.When {
			sp, err := splitPath(p)
			if err != nil {
				return bad("rule %d (%s): When path %s", i, c.group, quote(p))
			}
			c.when = append(c.when, cond{path: sp, want: want})
		}
		for _, p := range r.KeyPaths {
			sp, err := splitPath(p)
			if err != nil {
				return bad("rule %d (%s): KeyPaths path %s", i, c.group, quote(p))
			}
			c.keyPaths = append(c.keyPaths, sp)
		}
		switch r.Merge.Op {
		case Concat, Append:
			sp, err := splitPath(r.Merge.Path)
			if err != nil {
				return bad("rule %d (%s): %s needs a Merge.Path, got %s", i, c.group, r.Merge.Op, quote(r.Merge.Path))
			}
			c.path = sp
		case Last:
		case Custom:
			if r.Merge.Func == nil {
				return bad("rule %d (%s): custom merge without Func", i, c.group)
			}
		default:
			return bad("rule %d (%s): unknown Op %d", i, c.group, r.Merge.Op)
		}
		c.splitBase()
		c.prefix = make(map[string]string, len(r.Types))
		for _, t := range r.Types {
			c.prefix[t] = strconv.Itoa(len(s.rules)) + "\x1f" + c.group + "\x1f" + t
		}
		s.rules = append(s.rules, c)
		for _, t := range r.Types {
			s.byType[t] = append(s.byType[t], len(s.rules)-1)
		}
	}
	for i := range s.rules {
		s.markTextSafe(i)
	}
	return s, nil
}

// MustCompile is [Compile] that panics on an error; for package-level
// rule sets.
func MustCompile(rs RuleSet) *Set {
	s, err := Compile(rs)
	if err != nil {
		panic(err)
	}
	return s
}

// Name returns the rule set's name.
func (s *Set) Name() string { return s.name }

// Immediate reports whether events of type typ are lifecycle events that
// bypass coalescing (AgentPool's _is_immediate).
func (s *Set) Immediate(typ string) bool { return s.immediate[typ] }

// Key implements [eventbus.Coalescer]: ev's merge key, "" for passthrough,
// drop for an event a Drop matches (an explicit null at its path). A payload
// that is not the JSON shape a rule or Drop expects (a missing field, a
// string where an object was expected, no payload at all) passes through. The key is "<rule>\x1f<group>\x1f<type>"
// followed by the key values, so different types never share a key.
func (s *Set) Key(ev eventbus.Event) (key string, drop bool) {
	if s.immediate[ev.Type] {
		return "", false
	}
	for _, p := range s.drops[ev.Type] {
		if v, ok := lookup(ev.Data, p); ok && isNull(v) {
			return "", true
		}
	}
	for _, i := range s.byType[ev.Type] {
		r := &s.rules[i]
		if !r.applies(ev.Data) {
			continue
		}
		prefix := r.prefix[ev.Type]
		if r.Key == nil && len(r.keyPaths) == 0 {
			return prefix, false // no allocation for the common case
		}
		var b strings.Builder
		b.WriteString(prefix)
		if r.Key != nil {
			k, ok := r.Key(ev.Data)
			if !ok {
				return "", false
			}
			b.WriteByte(0x1f)
			b.WriteString(k)
		}
		for _, p := range r.keyPaths {
			b.WriteByte(0x1f)
			v, ok := lookup(ev.Data, p)
			if !ok {
				v = json.RawMessage("null")
			}
			b.Write(v)
		}
		return b.String(), false
	}
	return "", false
}

// splitBase finds the common prefix of the paths applies reads, so that
// the payload is scanned down to it once per event, not once per path.
func (r *rule) splitBase() {
	var paths [][]string
	for _, c := range r.when {
		paths = append(paths, c.path)
	}
	if r.Merge.Op == Concat || r.Merge.Op == Append {
		paths = append(paths, r.path)
	}
	if len(paths) == 0 {
		return
	}
	n := len(paths[0])
	for _, p := range paths[1:] {
		n = min(n, len(p))
		for i := range n {
			if p[i] != paths[0][i] {
				n = i
				break
			}
		}
	}
	r.base = paths[0][:n]
	for i := range r.when {
		r.when[i].rest = r.when[i].path[n:]
	}
	if r.path != nil {
		r.pathRest = r.path[n:]
	}
}

// applies reports whether the rule's conditions hold for data and the
// field it merges has the shape its Op needs.
func (r *rule) applies(data json.RawMessage) bool {
	obj, found := lookup(data, r.base) // a missing base: every path is missing
	for _, c := range r.when {
		if !found {
			return false
		}
		v, ok := lookup(obj, c.rest)
		if !ok || !equals(v, c.want) {
			return false
		}
	}
	switch r.Merge.Op {
	case Concat:
		v, ok := lookup(obj, r.pathRest)
		return !found || !ok || isNull(v) || firstByte(v) == '"'
	case Append:
		v, ok := lookup(obj, r.pathRest)
		return !found || !ok || isNull(v) || firstByte(v) == '['
	}
	return true
}

// Merge implements [eventbus.Coalescer]: the merged payload of evs, which
// all had merge key key.
func (s *Set) Merge(key string, evs []eventbus.Event) (json.RawMessage, error) {
	n, _, _ := strings.Cut(key, "\x1f")
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= len(s.rules) {
		return nil, fmt.Errorf("coalesce: %s: not a key of this set: %q", s.name, key)
	}
	if len(evs) == 0 {
		return nil, errors.New("coalesce: nothing to merge")
	}
	r := &s.rules[i]
	switch r.Merge.Op {
	case Concat:
		// The literals' contents are joined before they are unescaped, so
		// a UTF-16 surrogate pair whose \u escapes two events split is
		// one rune (each half unescaped alone is U+FFFD).
		lit := []byte{'"'}
		for _, ev := range evs {
			v, ok := lookup(ev.Data, r.path)
			if !ok || isNull(v) {
				continue
			}
			if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
				return nil, fmt.Errorf("coalesce: %s: event %d: %s: not a string: %.40s", s.name, ev.ID, r.Merge.Path, v)
			}
			lit = append(lit, v[1:len(v)-1]...)
		}
		str, err := stringValue(append(lit, '"'))
		if err != nil {
			return nil, fmt.Errorf("coalesce: %s: %s: %w", s.name, r.Merge.Path, err)
		}
		v, err := json.Marshal(str)
		if err != nil {
			return nil, err
		}
		return setPath(evs[0].Data, r.path, v)
	case Append:
		var items []json.RawMessage
		seen := false
		for _, ev := range evs {
			v, ok := lookup(ev.Data, r.path)
			if !ok {
				continue
			}
			seen = true
			if isNull(v) {
				continue
			}
			var part []json.RawMessage
			if err := json.Unmarshal(v, &part); err != nil {
				return nil, fmt.Errorf("coalesce: %s: event %d: %s: %w", s.name, ev.ID, r.Merge.Path, err)
			}
			items = append(items, part...)
		}
		last := evs[len(evs)-1].Data
		if !seen {
			return last, nil
		}
		if items == nil {
			items = []json.RawMessage{}
		}
		v, err := json.Marshal(items)
		if err != nil {
			return nil, err
		}
		return setPath(last, r.path, v)
	case Last:
		return evs[len(evs)-1].Data, nil
	case Custom:
		return r.Merge.Func(evs)
	}
	return nil, fmt.Errorf("coalesce: %s: unknown Op %d", s.name, r.Merge.Op)
}

var _ eventbus.Coalescer = (*Set)(nil)

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strconv.Quote(s)
}
