package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Ranges of the fields (inclusive), the same for the programmatic struct and
// for the environment.
const (
	// MaxCount bounds ReplayBufferSize, MaxQueueSize and MaxSubscribers:
	// 1,000,000, qwen-code's soft cap on its event ring.
	MaxCount = 1_000_000
	// MaxBytes bounds MaxQueuedBytes and ReplayBudgetBytes: 1 GiB.
	MaxBytes = 1 << 30
	// MinSessionTTL is the shortest SessionTTL: one second.
	MinSessionTTL = time.Second
	// MaxSessionTTL is the longest SessionTTL: 8760h (365 days).
	MaxSessionTTL = 8760 * time.Hour
	// MaxNATSRetention bounds NATSRetention: 1000 replay buffers.
	MaxNATSRetention = 1000
)

// The range errors, shared by Validate and Load so both say the same.
var (
	errCountRange = outOfRange("[1, 1000000]")
	errBytesRange = outOfRange("[1B, 1GiB]")
	errTTLRange   = outOfRange("[1s, 8760h]")
	errRetRange   = outOfRange("[1, 1000]")
	errAgeRange   = outOfRange("0 or [1s, 8760h]")
	errBlock      = invalid("refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)")
	errPolicy     = invalid("unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)")
)

// WithDefaults returns c with every zero field replaced by its default:
// ReplayBufferSize 100, MaxQueueSize 1000, MaxQueuedBytes 2 MiB,
// MaxSubscribers 64, SessionTTL 1h, ReplayBudgetBytes 8 MiB, NATSRetention
// 20, ClosedRetention 10m, MaxRetained 1000. OverflowPolicy stays zero: "" is not a policy but "apply the default
// rule" (drop_oldest in process, drop_subscriber for streams; see
// Config.OverflowPolicy), which only the subscriber's side can apply.
// DroppableTypes (default none) and DisableSlowClientWarning (default
// false) have no zero to replace. Negative
// values are kept, for [Config.Validate] to refuse. c is not modified; the
// returned Config shares c's DroppableTypes slice.
func (c Config) WithDefaults() Config {
	if c.ReplayBufferSize == 0 {
		c.ReplayBufferSize = DefaultReplayBufferSize
	}
	if c.MaxQueueSize == 0 {
		c.MaxQueueSize = DefaultMaxQueueSize
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if c.MaxSubscribers == 0 {
		c.MaxSubscribers = DefaultMaxSubscribers
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.ReplayBudgetBytes == 0 {
		c.ReplayBudgetBytes = DefaultReplayBudgetBytes
	}
	if c.NATSRetention == 0 {
		c.NATSRetention = DefaultNATSRetention
	}
	if c.ClosedRetention == 0 {
		c.ClosedRetention = DefaultClosedRetention
	}
	if c.MaxRetained == 0 {
		c.MaxRetained = DefaultMaxRetained
	}
	return c
}

// Validate checks c after [Config.WithDefaults] (so zero fields are fine)
// and returns nil or every problem at once, joined with [errors.Join]. Each
// problem is a [*FieldError] naming the Go field and its value, for example
// `config: MaxQueueSize=-5: out of range [1, 1000000]`, and matching
// [ErrOutOfRange] or [ErrInvalid]. The ranges are in the package
// documentation; negative numbers and durations are always errors, and so
// are a "block" or unknown OverflowPolicy and a DroppableTypes entry that is
// empty or contains white space or a control character. Validate does not
// modify c and is safe for concurrent use.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.WithDefaults().problems() {
		errs = append(errs, &FieldError{Field: p.field, Value: p.value, Err: p.err})
	}
	return errors.Join(errs...)
}

// problem is one out-of-range or invalid field, before it is attributed to
// a Go field (FieldError) or an environment variable (VarError).
type problem struct {
	field string
	value any
	err   error
}

// problems checks every field of c, which must already have its defaults,
// in declaration order.
func (c Config) problems() []problem {
	var ps []problem
	add := func(field string, value any, err error) {
		ps = append(ps, problem{field, value, err})
	}
	count := func(field string, v int) {
		if v < 1 || v > MaxCount {
			add(field, v, errCountRange)
		}
	}
	bytes := func(field string, v int64) {
		if v < 1 || v > MaxBytes {
			add(field, v, errBytesRange)
		}
	}
	count("ReplayBufferSize", c.ReplayBufferSize)
	count("MaxQueueSize", c.MaxQueueSize)
	bytes("MaxQueuedBytes", c.MaxQueuedBytes)
	count("MaxSubscribers", c.MaxSubscribers)
	if c.SessionTTL < MinSessionTTL || c.SessionTTL > MaxSessionTTL {
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
	if c.NATSRetention < 1 || c.NATSRetention > MaxNATSRetention {
		add("NATSRetention", c.NATSRetention, errRetRange)
	}
	if c.NATSMaxAge != 0 && (c.NATSMaxAge < time.Second || c.NATSMaxAge > MaxSessionTTL) {
		add("NATSMaxAge", c.NATSMaxAge, errAgeRange)
	}
	if c.ClosedRetention < MinSessionTTL || c.ClosedRetention > MaxSessionTTL {
		add("ClosedRetention", c.ClosedRetention, errTTLRange)
	}
	count("MaxRetained", c.MaxRetained)
	return ps
}

// Validate returns nil when p is drop_subscriber, drop_oldest or
// drop_newest, and otherwise an error quoting p that matches [ErrInvalid]:
// "block" is refused because it would stall every publisher behind one slow
// subscriber (publish never waits on a subscriber), and any other name,
// "" included, is unknown. Names are case-sensitive.
func (p OverflowPolicy) Validate() error {
	if err := p.check(); err != nil {
		return fmt.Errorf("config: overflow policy %q: %w", string(p), err)
	}
	return nil
}

// check is Validate without the value in the message.
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
