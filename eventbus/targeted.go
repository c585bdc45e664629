package eventbus

import (
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Targeted delivery: an event for chosen subscriptions only, without
// consuming the broadcast sequence.

// ErrQueueFull is the reason [Bus.SendTo] did not queue a targeted frame for
// a subscription: its live queue is at its frame or byte limit. The
// subscription itself is not touched (the overflow policy applies to
// published events only).
var ErrQueueFull = errors.New("eventbus: subscriber queue full")

// sendError reports one subscription a targeted frame did not reach; the
// error [Bus.SendTo] returns joins one per such subscription. Its text names
// the subscriber's id and session; err is ErrQueueFull, or why the
// subscription ended (its Err: ErrEvicted, ErrUnsubscribed,
// ErrSessionClosed, ErrClosed, a context error), or ErrInvalid for a
// subscription of another bus — matched with errors.Is through Unwrap.
type sendError struct {
	subscriber uint64 // the subscription's ID
	session    string // the session it was made on
	err        error
}

func (e *sendError) Error() string {
	return fmt.Sprintf("eventbus: targeted frame not queued for subscriber %d (session %q): %v", e.subscriber, e.session, e.err)
}

func (e *sendError) Unwrap() error { return e.err }

// SendTo queues a frame of type typ with payload data (encoded as by
// Publish) for each of subs only. The frame has no id: it is never stored,
// replayed or counted in the sequence, and keeps its place among the
// subscriber's other frames. It never blocks and is safe for concurrent use.
// Errors: ErrInvalid (bad type or data; nothing sent), ErrClosed, else the
// [errors.Join] of one error per subscription not reached (ErrQueueFull or
// why it ended); nil entries in subs are skipped.
func (b *Bus) SendTo(typ string, data any, subs ...*Subscription) error {
	if err := checkName("event type", typ); err != nil {
		return err
	}
	if frame.Reserved(typ) {
		return invalidf("event type %q is reserved for the bus's own frames", typ)
	}
	raw, err := encode(data)
	if err != nil {
		return err
	}
	tok := b.hist.RLock()
	closed := b.hist.Closed()
	b.hist.RUnlock(tok)
	if closed {
		return ErrClosed
	}
	now := b.nowNanos()
	var errs []error
	for _, s := range subs {
		if s == nil {
			continue
		}
		if s.bus != b {
			errs = append(errs, &sendError{subscriber: s.id, session: s.sess.ID,
				err: fmt.Errorf("%w: subscription of another bus", ErrInvalid)})
			continue
		}
		if err := s.deliverTargeted(&record{Session: s.sess.ID, Type: typ, Data: raw, Nanos: now}); err != nil {
			errs = append(errs, &sendError{subscriber: s.id, session: s.sess.ID, err: err})
		}
	}
	return errors.Join(errs...)
}

// deliverTargeted queues a targeted frame (id 0) for s when it fits the
// live limits; the error says why not.
func (s *Subscription) deliverTargeted(r *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return s.reason
	}
	if !s.q.PushTargeted(&s.rd, r) {
		return ErrQueueFull
	}
	s.wakeLocked()
	return nil
}
