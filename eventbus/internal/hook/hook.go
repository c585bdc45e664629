package hook

import "errors"

// ErrBackend is backend.ErrBackend, defined here so that eventbus, which
// ends subscriptions with it, need not import eventbus/backend.
var ErrBackend = errors.New("eventbus: backend failure")

// ErrProducerConflict is backend.ErrProducerConflict: a producer record
// moved between its read and the append that was to replace it.
var ErrProducerConflict = errors.New("eventbus: producer record changed meanwhile")

var (
	// NewBus returns a *eventbus.Bus configured by opts (an
	// eventbus.Options) whose ids and history come from be (a
	// backend.Backend), and the backend.Feed that be must deliver into.
	// The feed is not started.
	NewBus func(opts, be any) (bus, feed any, err error)

	// Prepare is the first half of a publish through a pipeline on bus (a
	// *eventbus.Bus): the checks and encoding of Bus.Publish, then the
	// session (created if new) and its place in the tree. opts is a
	// []eventbus.PublishOption; ev, a *eventbus.Event, receives the event
	// to append (a pointer, so that no Event is boxed per publish).
	Prepare func(bus any, sessionID, typ string, data, opts, ev any) (path []string, err error)

	// Acked raises the highest id the backend acknowledged to bus.
	Acked func(bus any, id uint64)

	// Backend returns the backend.Backend bus was made over, or nil for
	// the in-memory bus.
	Backend func(bus any) any
)
