package config

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
)

// ErrUnknownVariable is matched (errors.Is) by the [*VarError] of an
// AGENTPOOL_EVENTBUS_* variable that this package does not define, usually
// a typo. Every error from [Load] and [LoadWith] is a [*VarError] or an
// [*eventbus.OptionError]; a value that does not parse (not an integer,
// not a byte size, not a duration, not a boolean) or is not allowed
// matches [eventbus.ErrInvalid], one out of range [eventbus.ErrOutOfRange].
var ErrUnknownVariable = errors.New("unknown variable")

// VarError reports one bad AGENTPOOL_EVENTBUS_* environment variable. Its
// text is the variable, its value exactly as found in the environment and
// the reason, for example
//
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE="abc": not an integer
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]
//
// The value is printed bare for range errors (it parsed, so it is a plain
// number, size or duration) and Go-quoted otherwise, so stray spaces and
// control characters show. Err matches [eventbus.ErrOutOfRange],
// [eventbus.ErrInvalid] or [ErrUnknownVariable] under [errors.Is].
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
	if errors.Is(e.Err, eventbus.ErrOutOfRange) {
		v = e.Value
	}
	return e.Var + "=" + v + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *VarError) Unwrap() error { return e.Err }

// reason is the "what is wrong" part of a VarError the parsers find: a
// message that matches one sentinel under errors.Is.
type reason struct {
	kind error
	msg  string
}

func (r *reason) Error() string        { return r.msg }
func (r *reason) Is(target error) bool { return target == r.kind }

func invalid(format string, args ...any) error {
	return &reason{kind: eventbus.ErrInvalid, msg: fmt.Sprintf(format, args...)}
}
