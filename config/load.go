package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Prefix is the prefix of every environment variable this package reads.
// The names are in AgentPool's namespace and follow its setting names
// (AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE is its eventbus_replay_buffer_size),
// but AgentPool itself reads none of them: it takes those settings from its
// YAML manifest and the EventBus constructor. [Load] treats every variable
// with this prefix as its own and refuses the ones it does not know.
const Prefix = "AGENTPOOL_EVENTBUS_"

// Load reads the configuration from the AGENTPOOL_EVENTBUS_* environment
// variables (see the package documentation for the table) into an
// [eventbus.Options], applies its WithDefaults and validates the result. It is [LoadWith] with a
// zero base.
//
// A variable that is unset, or set to the empty string, means its default;
// a variable that is set is parsed and range-checked as given, so an explicit
// "0" is an error, not the default. Every bad variable, and every unknown
// AGENTPOOL_EVENTBUS_* variable, is reported at once: the error is an
// [errors.Join] of [*VarError] values, each naming the variable and its
// value. On error the returned Options is the zero value.
//
// Load reads the process environment once (a snapshot of [os.Environ]) and
// is safe for concurrent use, as long as nothing changes the environment at
// the same time.
func Load() (eventbus.Options, error) { return LoadWith(eventbus.Options{}) }

// LoadWith is [Load] for embedded use, where the program configures the bus
// itself and the environment only fills what it left open (for defaults
// that operators may override, see [LoadWithDefaults]): every non-zero
// field of base wins over its variable, and every zero field is read from the
// environment, then defaulted. A bool field can therefore only be switched on
// by base, never forced off; an empty DroppableTypes in base defers to the
// environment.
//
// Variables are checked even when base overrides them, so a bad or unknown
// variable is still reported. Bad values that come from base are reported as
// [*eventbus.OptionError] naming the Go field, as eventbus.Options.Validate
// does; all errors are joined with [errors.Join]. Fields without a
// variable (Logger, Diagnostics, Epoch, SessionController) are taken from
// base as they are. On error the returned Options is the zero
// value. base is not modified.
func LoadWith(base eventbus.Options) (eventbus.Options, error) {
	return load(os.Environ(), base, false)
}

// LoadWithDefaults is [Load] with the program's own defaults: every
// variable that is set wins (an operator's AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE
// beats the program's ReplayBufferSize, AGENTPOOL_EVENTBUS_REPLAY_COMPACT=off
// turns the program's ReplayCompact off, a bool variable set to false
// turns the program's true off), and every field whose variable is unset
// or empty takes defaults' value, or eventbus's default when that is zero
// too. It is the other order of [LoadWith], whose base beats the
// environment. Errors, fields without a variable and the zero Options on
// error are as for LoadWith; defaults is not modified.
func LoadWithDefaults(defaults eventbus.Options) (eventbus.Options, error) {
	return load(os.Environ(), defaults, true)
}

// load is LoadWith (envWins false: base beats the environment) and
// LoadWithDefaults (envWins true: a set variable beats base) over an
// explicit environment ("KEY=value" entries, as os.Environ returns them),
// so that tests and fuzzing need not touch the process environment.
func load(environ []string, base eventbus.Options, envWins bool) (eventbus.Options, error) {
	vars := envMap(environ)
	var fromEnv eventbus.Options
	err := env.ParseWithOptions(&fromEnv, env.Options{
		Prefix:      Prefix,
		Environment: vars,
		FuncMap:     parsers,
	})
	errs, failed := varErrors(err, vars)

	// Range-check every variable that is set and parsed, as given: an
	// explicit "0" where a zero field means the default is refused with the
	// field's range (never a silent default), the rest as Options.Validate
	// checks them. This happens whether or not base overrides the field, so
	// that a bad variable never goes unnoticed.
	set := make(map[string]bool, len(fields))
	fv := reflect.ValueOf(fromEnv)
	for _, f := range fields {
		if vars[f.key] == "" || failed[f.name] {
			continue
		}
		set[f.name] = true
		if err := zeroMeansDefault(f, fv.FieldByIndex(f.index)); err != nil {
			errs = append(errs, &VarError{Var: f.key, Value: vars[f.key], Err: err})
		}
	}
	for _, p := range problems(fromEnv) {
		if set[p.Field] {
			key := keyOf(p.Field)
			errs = append(errs, &VarError{Var: key, Value: vars[key], Err: p.Err})
		}
	}

	// Merge: a non-zero base field wins over its variable (LoadWith), or
	// a set variable wins over base (LoadWithDefaults); problems of the
	// fields taken from base name the Go field. The fields without a
	// variable (Logger, Epoch, …) come from base as they are.
	merged := base
	fromBase := make(map[string]bool, len(fields))
	ev, mv := reflect.ValueOf(fromEnv), reflect.ValueOf(&merged).Elem()
	for _, f := range fields {
		m := mv.FieldByIndex(f.index)
		switch {
		case envWins && set[f.name]:
			m.Set(ev.FieldByIndex(f.index))
		case !isZero(m):
			fromBase[f.name] = true
		default:
			m.Set(ev.FieldByIndex(f.index))
		}
	}
	merged = merged.WithDefaults()
	for _, p := range problems(merged) {
		if fromBase[p.Field] {
			errs = append(errs, p)
		}
	}

	if v := vars[CompactVar]; v != "" {
		set, err := compactRules(v)
		switch {
		case err != nil:
			errs = append(errs, &VarError{Var: CompactVar, Value: v, Err: err})
		case envWins || merged.ReplayCompact == nil:
			merged.ReplayCompact = set
		}
	}

	_, natsErrs := loadNATS(vars)
	errs = append(errs, natsErrs...)
	errs = append(errs, unknownVars(vars)...)
	if len(errs) > 0 {
		return eventbus.Options{}, errors.Join(errs...)
	}
	return merged, nil
}

// field ties an Options field to its variable; fields lists them in
// declaration order, read once from the env tags so that the tags stay the
// only place a variable is named.
type field struct {
	name  string // Go field name
	key   string // full variable name
	index []int  // for reflect.Value.FieldByIndex
}

var fields = fieldsOf(reflect.TypeFor[eventbus.Options]())

// fieldsOf lists the fields of struct type t that have a variable.
func fieldsOf(t reflect.Type) []field {
	var fs []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if tag, _, _ := strings.Cut(sf.Tag.Get("env"), ","); tag != "" && tag != "-" {
			fs = append(fs, field{name: sf.Name, key: Prefix + tag, index: sf.Index})
		}
	}
	return fs
}

// keyOf returns the variable of the Options or NATS field name.
func keyOf(name string) string {
	for _, f := range slices.Concat(fields, natsFields) {
		if f.name == name {
			return f.key
		}
	}
	return name
}

// known reports whether k is a variable of this package.
func known(k string) bool {
	return k == CompactVar || slices.ContainsFunc(slices.Concat(fields, natsFields), func(f field) bool { return f.key == k })
}

// envMap turns "KEY=value" entries into a map. The first entry for a key
// wins, as it does for os.Getenv; entries without "=" are skipped.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

// isZero reports whether a base field counts as unset: its zero value, or an
// empty slice.
func isZero(v reflect.Value) bool {
	if v.Kind() == reflect.Slice {
		return v.Len() == 0
	}
	return v.IsZero()
}

// varErrors turns env's aggregate of parse errors into VarErrors and returns
// the names of the fields that failed to parse.
func varErrors(err error, vars map[string]string) ([]error, map[string]bool) {
	failed := make(map[string]bool)
	if err == nil {
		return nil, failed
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return []error{fmt.Errorf("config: %w", err)}, failed
	}
	out := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			key := keyOf(pe.Name)
			failed[pe.Name] = true
			out = append(out, &VarError{Var: key, Value: vars[key], Err: pe.Err})
			continue
		}
		out = append(out, fmt.Errorf("config: %w", e))
	}
	return out, failed
}

// unknownVars reports every variable that starts with Prefix (in any case)
// but is not an Options field's, sorted by name, suggesting the closest known
// name when it is a likely typo.
func unknownVars(vars map[string]string) []error {
	var names []string
	for k := range vars {
		if strings.HasPrefix(strings.ToUpper(k), Prefix) && !known(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	out := make([]error, 0, len(names))
	for _, k := range names {
		err := ErrUnknownVariable
		if s := suggest(k); s != "" {
			err = &reason{kind: ErrUnknownVariable, msg: "unknown variable (did you mean " + s + "?)"}
		}
		out = append(out, &VarError{Var: k, Value: vars[k], Err: err})
	}
	return out
}

// suggest returns the known variable closest to k, compared in upper case:
// the one within a third of its length in edits, or else the only one that
// k is a prefix of; "" when there is none.
func suggest(k string) string {
	k = strings.ToUpper(k)
	best, dist := "", math.MaxInt
	all := slices.Concat(fields, natsFields)
	for _, f := range all {
		if d := textutil.Distance(k, f.key, false); d < dist {
			best, dist = f.key, d
		}
	}
	if dist <= (len(best)-len(Prefix))/3 {
		return best
	}
	best = ""
	for _, f := range all {
		if len(k) > len(Prefix) && strings.HasPrefix(f.key, k) {
			if best != "" {
				return ""
			}
			best = f.key
		}
	}
	return best
}

// parsers replace env's built-in parsers by type, so that every syntax error
// reads the same way. They check syntax only; ranges are checked per field
// by eventbus.Options.Validate. Numbers that overflow are clamped (as strconv does) so
// that they are reported as out of range rather than as not numbers.
var parsers = map[reflect.Type]env.ParserFunc{
	reflect.TypeFor[int]():           parseInt,
	reflect.TypeFor[int64]():         parseBytes, // MaxQueuedBytes, ReplayBudgetBytes
	reflect.TypeFor[time.Duration](): parseDuration,
	reflect.TypeFor[bool]():          parseBool,
	reflect.TypeFor[[]string]():      parseList,
}

func parseInt(v string) (any, error) {
	n, err := strconv.Atoi(v)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, invalid("not an integer")
	}
	return n, nil
}

// byteUnits are the accepted size suffixes: SI (powers of 1000) and IEC
// (powers of 1024), case-sensitive apart from kB.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// byteSizeWant is the error of a value that is not a byte size: it lists
// every suffix of byteUnits, so that the message and the parser cannot
// disagree.
var byteSizeWant = func() string {
	var b strings.Builder
	b.WriteString("not a byte size (want an integer, optionally with a leading + and, with no space, one of the suffixes ")
	for i, u := range byteUnits {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(u.suffix)
	}
	b.WriteString(": 2MiB, 512KiB, 100KB)")
	return b.String()
}()

// parseBytes parses a byte size: an integer with an optional sign and an
// optional unit suffix from byteUnits, without spaces ("2097152", "2MiB",
// "512KiB", "100KB").
func parseBytes(v string) (any, error) {
	num, mult := v, int64(1)
	for _, u := range byteUnits {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, invalid("%s", byteSizeWant)
	}
	switch {
	case n > math.MaxInt64/mult:
		return int64(math.MaxInt64), nil
	case n < math.MinInt64/mult:
		return int64(math.MinInt64), nil
	}
	return n * mult, nil
}

func parseDuration(v string) (any, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, invalid("not a Go duration (for example 90s, 30m or 2h)")
	}
	return d, nil
}

func parseBool(v string) (any, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, invalid("not a boolean (want true or false)")
	}
	return b, nil
}

// parseList splits a comma-separated list, trims white space around each
// entry and skips empty entries and duplicates; an entry with white space
// or a control character inside is refused by the range check
// (eventbus.Options.Validate).
func parseList(v string) (any, error) {
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" || slices.Contains(out, e) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// zeroMeansDefault returns the range error of field f when its variable
// gave v, a zero, and a zero field means a default (eventbus.Options's
// WithDefaults replaces it): the error eventbus.Options.Validate gives the
// field for a negative value, which is always out of range. Otherwise nil.
func zeroMeansDefault(f field, v reflect.Value) error {
	if !v.IsZero() || v.Kind() == reflect.Slice || v.Kind() == reflect.Bool || v.Kind() == reflect.String {
		return nil
	}
	d := reflect.ValueOf(eventbus.Options{}.WithDefaults())
	if d.FieldByIndex(f.index).IsZero() {
		return nil // zero is a value of its own (ReplayMaxAge: none)
	}
	var probe eventbus.Options
	pv := reflect.ValueOf(&probe).Elem().FieldByIndex(f.index)
	pv.SetInt(-1)
	for _, p := range problems(probe) {
		if p.Field == f.name {
			return p.Err
		}
	}
	return nil
}

// problems returns every bad field of o, as o.Validate finds them.
func problems(o eventbus.Options) []*eventbus.OptionError {
	err := o.Validate()
	if err == nil {
		return nil
	}
	var out []*eventbus.OptionError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var oe *eventbus.OptionError
		if errors.As(e, &oe) {
			out = append(out, oe)
		}
	}
	return out
}

// CompactVar names the variable that turns replay-buffer compaction on
// (Options.ReplayCompact): off (the default), acp (coalesce.ACP) or
// agentpool (coalesce.AgentPool). It is read apart from the struct tags
// because its value is a rule set, which package eventbus does not know;
// a rule set given in code (LoadWith's base) wins over it, as for every
// other field.
const CompactVar = Prefix + "REPLAY_COMPACT"

// compactRules returns the rule set v names: nil for off.
func compactRules(v string) (eventbus.Coalescer, error) {
	if v == "off" {
		return nil, nil
	}
	if set, ok := coalesce.Lookup(v); ok {
		return set, nil
	}
	return nil, invalid("unknown rule set (want off, %s)", strings.Join(coalesce.Names(), " or "))
}
