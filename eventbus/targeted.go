package eventbus

import (
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Targeted delivery: an event for chosen subscriptions only, OpenClaw's
// gateway sending tool events to the one connection that registered for
// them (server-chat.ts) without consuming the broadcast sequence.

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

// SendTo queues an event of type typ with payload data for each of subs
// only: a targeted frame. Use it for what concerns one connection and no
// other — a per-connection greeting or prompt, a permission request for the
// client that asked, a tool event for the connection that registered for it
// (OpenClaw's targeted sends). The adapters' OnSubscribe hooks hand the
// application each connection's Subscription.
//
// A targeted frame has no id: it is not stored in any replay buffer, does
// not consume a number of the bus sequence, never moves a client's
// Last-Event-ID and is never replayed — a subscriber that was not connected
// when it was sent never gets it, and a resume does not bring it back (it is
// not resumable: send again what must survive a reconnect, or publish it).
// For the subscriber it is a frame like the others, in order with them: it
// comes after everything queued before the call (after the replay, and its
// replay_complete if it has one, when sent right after Subscribe), before everything
// queued after. Its Session is the subscription's session, Replay is false.
//
// It counts against the subscription's live queue limits like a published
// event and is freed when read; when the queue is at a limit the frame is
// not queued for that subscription and SendTo reports ErrQueueFull for it
// (one oversized frame is admitted into an empty queue, as for publish).
// drop_oldest never drops a queued targeted frame. It never blocks on a
// subscriber and takes no bus lock beyond a glance at the structure lock's
// read side (it never waits for a publish): it is safe for concurrent use,
// including with Close, cancellation and eviction of the subscriptions (a
// frame sent to a subscription that has ended is reported, never queued).
//
// data is encoded to JSON once, as by Publish. Errors: ErrInvalid naming the
// value for an empty, over-long or [frame.Reserved] type, a type with a control
// character, or data that cannot be encoded (nothing is sent); ErrClosed
// after [Bus.Close]; otherwise nil when every subscription got the frame,
// else the [errors.Join] of one error per subscription that did not (nil
// entries in subs are skipped): each reads "eventbus: targeted frame not
// queued for subscriber <ID> (session "<id>"): <reason>" and matches its
// reason with errors.Is (ErrQueueFull, or why the subscription ended:
// ErrEvicted, ErrUnsubscribed, ErrSessionClosed, ErrClosed, a context error;
// ErrInvalid for a subscription of another bus).
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
