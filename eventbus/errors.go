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
	// subscribers; the error wraps it and reads "eventbus: subscriber limit
	// exceeded: session "<id>" has <n> subscribers (the limit)".
	ErrSubscriberLimit = errors.New("eventbus: subscriber limit exceeded")
	// ErrEvicted: the subscription was evicted for overflow (client_evicted).
	ErrEvicted = errors.New("eventbus: subscriber evicted")
	// ErrUnsubscribed: the subscription was ended by [Subscription.Close].
	ErrUnsubscribed = errors.New("eventbus: unsubscribed")
	// ErrInvalid: a bad argument; the wrapping error names the value.
	ErrInvalid = errors.New("eventbus: invalid argument")
)

// limitf is the error Subscribe returns when session id is at its
// subscriber cap: ErrSubscriberLimit wrapped with the session and the limit
// (the limit in force is also [Bus.Options]().MaxSubscribers).
func limitf(id string, limit int) error {
	return fmt.Errorf("%w: session %q has %d subscribers (the limit)", ErrSubscriberLimit, id, limit)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
