package eventbus

import (
	"errors"
	"fmt"
)

// Sentinel errors. Each is matched with errors.Is; errors that carry data wrap
// one of these.
var (
	// ErrClosed: the bus was closed ([Bus.Close]).
	ErrClosed = errors.New("eventbus: bus closed")
	// ErrSessionClosed: the session was closed ([Bus.CloseSession]); also the
	// reason a subscription of that session ended.
	ErrSessionClosed = errors.New("eventbus: session closed")
	// ErrSessionNotFound: the session does not exist (only where the caller
	// asked for an existing session).
	ErrSessionNotFound = errors.New("eventbus: session not found")
	// ErrSubscriberLimit: the session already has its maximum number of
	// subscribers; the error is a [*SubscriberLimitError].
	ErrSubscriberLimit = errors.New("eventbus: subscriber limit exceeded")
	// ErrEvicted: the subscription was evicted for overflow (client_evicted).
	ErrEvicted = errors.New("eventbus: subscriber evicted")
	// ErrUnsubscribed: the subscription was ended by [Subscription.Close].
	ErrUnsubscribed = errors.New("eventbus: unsubscribed")
	// ErrInvalid: a bad argument; the wrapping error names the value.
	ErrInvalid = errors.New("eventbus: invalid argument")
)

// SubscriberLimitError is returned by [Bus.Subscribe] when the session is at
// its subscriber cap. errors.Is(err, ErrSubscriberLimit) holds.
type SubscriberLimitError struct {
	Session string // the session that is full
	Limit   int    // the cap in force
}

// Error names the session and the limit.
func (e *SubscriberLimitError) Error() string {
	return fmt.Sprintf("eventbus: subscriber limit exceeded: session %q has %d subscribers (the limit)", e.Session, e.Limit)
}

// Is makes errors.Is(err, ErrSubscriberLimit) true.
func (e *SubscriberLimitError) Is(target error) bool { return target == ErrSubscriberLimit }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
