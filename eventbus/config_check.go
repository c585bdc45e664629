package eventbus

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Ranges of the fields (inclusive), the same for the programmatic struct and
// for the environment.
const (
	// maxCount bounds ReplayBufferSize, MaxQueueSize and MaxSubscribers:
	// 1,000,000.
	maxCount = 1_000_000
	// maxBytes bounds MaxQueuedBytes and ReplayBudgetBytes: 1 GiB.
	maxBytes = 1 << 30
	// minSessionTTL is the shortest SessionTTL: one second.
	minSessionTTL = time.Second
	// maxSessionTTL is the longest SessionTTL: 8760h (365 days).
	maxSessionTTL = 8760 * time.Hour
)

// The range errors, shared by Validate and the config package so both say
// the same.
var (
	errCountRange = outOfRange("[1, 1000000]")
	errBytesRange = outOfRange("[1B, 1GiB]")
	errTTLRange   = outOfRange("[1s, 8760h]")
	errAgeRange   = outOfRange("0 or [1s, 8760h]")
	errGraceRange = outOfRange("[100ms, 1h]")
	errHoldRange  = outOfRange("[1s, 1h]")
	errLeaseRange = outOfRange("[1s, 5m]")
	errBytes0     = outOfRange("0 or [1B, 1GiB]")
	errBlock      = invalid("refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)")
	errPolicy     = invalid("unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)")
)

// WithDefaults returns c with every zero field replaced by its default
// (each field's doc names it). OverflowPolicy stays zero: "" means "apply
// the default rule". Negative values are kept for [Options.Validate]. c is
// not modified.
func (c Options) WithDefaults() Options {
	c.ReplayBufferSize = cmp.Or(c.ReplayBufferSize, defaultReplayBufferSize)
	c.MaxQueueSize = cmp.Or(c.MaxQueueSize, defaultMaxQueueSize)
	c.MaxQueuedBytes = cmp.Or(c.MaxQueuedBytes, defaultMaxQueuedBytes)
	c.MaxSubscribers = cmp.Or(c.MaxSubscribers, defaultMaxSubscribers)
	c.SessionTTL = cmp.Or(c.SessionTTL, defaultSessionTTL)
	c.ReplayBudgetBytes = cmp.Or(c.ReplayBudgetBytes, defaultReplayBudgetBytes)
	c.ClosedRetention = cmp.Or(c.ClosedRetention, defaultClosedRetention)
	c.MaxRetained = cmp.Or(c.MaxRetained, defaultMaxRetained)
	c.PresenceGrace = cmp.Or(c.PresenceGrace, defaultPresenceGrace)
	c.CancelHold = cmp.Or(c.CancelHold, defaultCancelHold)
	c.TurnLease = cmp.Or(c.TurnLease, defaultTurnLease)
	return c
}

// Validate checks c after [Options.WithDefaults] and returns nil or every
// problem joined with [errors.Join]: each an [*OptionError] naming the field
// and value, matching [ErrInvalid] (and [ErrOutOfRange] for a range). Safe
// for concurrent use.
func (c Options) Validate() error {
	var errs []error
	for _, p := range c.WithDefaults().problems() {
		errs = append(errs, &OptionError{Field: p.field, value: p.value, Err: p.err})
	}
	return errors.Join(errs...)
}

// problem is one out-of-range or invalid field, before it is attributed to
// a Go field (OptionError).
type problem struct {
	field string
	value any
	err   error
}

// problems checks every field of c, which must already have its defaults,
// in declaration order.
func (c Options) problems() []problem {
	var ps []problem
	add := func(field string, value any, err error) {
		ps = append(ps, problem{field, value, err})
	}
	count := func(field string, v int) {
		if v < 1 || v > maxCount {
			add(field, v, errCountRange)
		}
	}
	bytes := func(field string, v int64) {
		if v < 1 || v > maxBytes {
			add(field, v, errBytesRange)
		}
	}
	count("ReplayBufferSize", c.ReplayBufferSize)
	count("MaxQueueSize", c.MaxQueueSize)
	bytes("MaxQueuedBytes", c.MaxQueuedBytes)
	count("MaxSubscribers", c.MaxSubscribers)
	if c.SessionTTL < minSessionTTL || c.SessionTTL > maxSessionTTL {
		add("SessionTTL", c.SessionTTL, errTTLRange)
	}
	if err := c.OverflowPolicy.check(); err != nil && c.OverflowPolicy != "" {
		add("OverflowPolicy", c.OverflowPolicy, err)
	}
	for _, t := range c.DroppableTypes {
		if err := checkType(t); err != nil {
			add("DroppableTypes", c.DroppableTypes, err)
			break
		}
	}
	bytes("ReplayBudgetBytes", c.ReplayBudgetBytes)
	if c.ClosedRetention < minSessionTTL || c.ClosedRetention > maxSessionTTL {
		add("ClosedRetention", c.ClosedRetention, errTTLRange)
	}
	count("MaxRetained", c.MaxRetained)
	if c.ReplayMaxBytes != 0 && (c.ReplayMaxBytes < 1 || c.ReplayMaxBytes > maxBytes) {
		add("ReplayMaxBytes", c.ReplayMaxBytes, errBytes0)
	}
	if c.ReplayMaxAge != 0 && (c.ReplayMaxAge < time.Second || c.ReplayMaxAge > maxSessionTTL) {
		add("ReplayMaxAge", c.ReplayMaxAge, errAgeRange)
	}
	if c.PresenceGrace < 100*time.Millisecond || c.PresenceGrace > time.Hour {
		add("PresenceGrace", c.PresenceGrace, errGraceRange)
	}
	if c.CancelHold < time.Second || c.CancelHold > time.Hour {
		add("CancelHold", c.CancelHold, errHoldRange)
	}
	if c.TurnLease < time.Second || c.TurnLease > 5*time.Minute {
		add("TurnLease", c.TurnLease, errLeaseRange)
	}
	return ps
}

// validate returns nil when p is drop_subscriber, drop_oldest or
// drop_newest, and otherwise an error quoting p that matches [ErrInvalid]:
// "block" is refused because it would stall every publisher behind one slow
// subscriber (publish never waits on a subscriber), and any other name,
// "" included, is unknown. Names are case-sensitive.
func (p OverflowPolicy) validate() error {
	if err := p.check(); err != nil {
		return invalidf("overflow policy %q: %v", string(p), err)
	}
	return nil
}

// check is validate without the value in the message.
func (p OverflowPolicy) check() error {
	switch p {
	case DropSubscriber, DropOldest, DropNewest:
		return nil
	case "block":
		return errBlock
	}
	return errPolicy
}

// checkType refuses an empty droppable event type and one containing white
// space or a control character (a CR or LF would break SSE framing).
func checkType(t string) error {
	if t == "" {
		return invalid("empty entry")
	}
	if strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return invalid("entry %q contains white space or a control character", t)
	}
	return nil
}

// ErrOutOfRange is matched (errors.Is) by an [*OptionError] whose value
// parsed but lies outside the field's range; such an error matches
// [ErrInvalid] too.
var ErrOutOfRange = errors.New("eventbus: option out of range")

// OptionError reports one bad field of an [Options], found by
// [Options.Validate] (and so by [New]). Its text names the Go field and
// the value, for example
//
//	eventbus: MaxQueueSize=-5: out of range [1, 1000000]
//
// The value in the text is the field's after [Options.WithDefaults]. Err
// matches [ErrInvalid], and [ErrOutOfRange] for a value out of range,
// under [errors.Is]; the config package reuses it to name the variable.
type OptionError struct {
	// Field is the name of the Options field, e.g. "SessionTTL".
	Field string
	// Err says what is wrong with it.
	Err error

	value any // the field's value, for the text
}

// Error returns `eventbus: Field=value: reason`; strings, policies and
// lists are Go-quoted, durations use [time.Duration.String].
func (e *OptionError) Error() string {
	var v string
	switch x := e.value.(type) {
	case string, OverflowPolicy, []string:
		v = fmt.Sprintf("%q", x)
	case time.Duration:
		v = x.String()
	default:
		v = fmt.Sprint(x)
	}
	return "eventbus: " + e.Field + "=" + v + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *OptionError) Unwrap() error { return e.Err }

// reason is the "what is wrong" part of an OptionError: a message that
// matches ErrInvalid, and ErrOutOfRange when outOfRange.
type reason struct {
	msg        string
	outOfRange bool
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Is(target error) bool {
	return target == ErrInvalid || r.outOfRange && target == ErrOutOfRange
}

func invalid(format string, args ...any) error {
	return &reason{msg: fmt.Sprintf(format, args...)}
}

func outOfRange(bounds string) error {
	return &reason{msg: "out of range " + bounds, outOfRange: true}
}
