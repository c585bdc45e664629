package config

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinels for [errors.Is]. Every error from [Load], [LoadWith] and
// [Config.Validate] is a [*VarError] or a [*FieldError] whose Err matches one
// of them.
var (
	// ErrOutOfRange: the value parsed but lies outside the field's range.
	ErrOutOfRange = errors.New("out of range")
	// ErrInvalid: the value does not parse (not an integer, not a byte size,
	// not a duration, not a boolean), or is not one of the allowed names
	// (overflow policy), or is a malformed list entry.
	ErrInvalid = errors.New("invalid value")
	// ErrUnknownVariable: an AGENTPOOL_EVENTBUS_* variable that this package
	// does not define, usually a typo.
	ErrUnknownVariable = errors.New("unknown variable")
)

// VarError reports one bad AGENTPOOL_EVENTBUS_* environment variable. Its
// text is the variable, its value exactly as found in the environment and
// the reason, for example
//
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE="abc": not an integer
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]
//
// The value is printed bare for range errors (it parsed, so it is a plain
// number, size or duration) and Go-quoted otherwise, so stray spaces and
// control characters show. Err matches [ErrOutOfRange], [ErrInvalid] or
// [ErrUnknownVariable] under [errors.Is].
type VarError struct {
	// Var is the full variable name, e.g. AGENTPOOL_EVENTBUS_SESSION_TTL.
	Var string
	// Value is the variable's value, unmodified.
	Value string
	// Err says what is wrong with it.
	Err error
}

// Error returns `VAR=value: reason`.
func (e *VarError) Error() string {
	v := strconv.Quote(e.Value)
	if errors.Is(e.Err, ErrOutOfRange) {
		v = e.Value
	}
	return e.Var + "=" + v + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *VarError) Unwrap() error { return e.Err }

// FieldError reports one bad field of a programmatic [Config], found by
// [Config.Validate] (or by [LoadWith] for a field set in its base). Its text
// names the Go field and the value, for example
//
//	config: ReplayBufferSize=-5: out of range [1, 1000000]
//
// Err matches [ErrOutOfRange] or [ErrInvalid] under [errors.Is].
type FieldError struct {
	// Field is the name of the Config field, e.g. "SessionTTL".
	Field string
	// Value is the field's value after [Config.WithDefaults].
	Value any
	// Err says what is wrong with it.
	Err error
}

// Error returns `config: Field=value: reason`; strings, policies and lists
// are Go-quoted, durations use [time.Duration.String].
func (e *FieldError) Error() string {
	var v string
	switch x := e.Value.(type) {
	case string, OverflowPolicy, []string:
		v = fmt.Sprintf("%q", x)
	case time.Duration:
		v = x.String()
	default:
		v = fmt.Sprint(x)
	}
	return "config: " + e.Field + "=" + v + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// reason is the "what is wrong" part of a VarError or FieldError: a message
// that matches one sentinel under errors.Is.
type reason struct {
	kind error
	msg  string
}

func (r *reason) Error() string        { return r.msg }
func (r *reason) Is(target error) bool { return target == r.kind }

func invalid(format string, args ...any) error {
	return &reason{kind: ErrInvalid, msg: fmt.Sprintf(format, args...)}
}

func outOfRange(bounds string) error {
	return &reason{kind: ErrOutOfRange, msg: "out of range " + bounds}
}
