package durable

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Reading a stream: each read is one short-lived bus subscription with the
// read's offset as its cursor (StrictCursor: a lost position is a typed
// *eventbus.PositionLostError, decided by the bus — one epoch decision, one
// eviction decision), its replay up to replay_complete, then (with a wait)
// the first live events.

// from is where a read starts: after event id after, of epoch (the
// offset's, as the bus takes it: resume.BusEpoch; "" the bus's own). start
// marks a read from the stream's beginning (-1, an offset of id 0, now):
// history the bus no longer holds is then skipped — the read begins with
// the oldest event held — where a client's own offset is 410 ring_evicted.
type from struct {
	after uint64
	epoch string
	start bool
}

// batch is the result of one read.
type batch struct {
	items  []item
	start  uint64 // the offset the batch follows: the read's, or later when history was skipped (from.start)
	next   uint64 // the offset after the batch
	more   bool   // stopped early (chunk size, replay budget): not up to date
	closed bool   // the stream is closed and next is its final offset
}

// maxSkips bounds the subscribes of one read from the beginning that find
// the oldest held event evicted again meanwhile (a publisher a whole replay
// buffer ahead); past it the read is 410 ring_evicted.
const maxSkips = 16

// read returns s's items after f, waiting up to wait for the first one
// when none is there yet (0: no wait). A fork reads its source up to
// forkAt first; its waits are for its own appends only.
func (h *Handler) read(ctx context.Context, s *stream, f from, wait time.Duration) (batch, error) {
	if s.src != nil && f.after < s.forkAt {
		b, err := h.read(ctx, s.src, f, 0)
		if err != nil {
			return batch{}, err
		}
		cut := false
		for i, it := range b.items {
			if it.id > s.forkAt {
				b.items, cut = b.items[:i], true
				break
			}
		}
		b.closed = false
		if !cut && b.more {
			if n := len(b.items); n > 0 {
				b.next = b.items[n-1].id
			}
			return b, nil
		}
		own := from{after: s.forkAt}
		if len(b.items) == 0 {
			return h.read(ctx, s, own, wait)
		}
		ob, err := h.readOwn(ctx, s, own, 0)
		if err != nil {
			return batch{}, err
		}
		ob.items, ob.start = append(b.items, ob.items...), b.start
		return ob, nil
	}
	f.after = max(f.after, s.ownStart())
	return h.readOwn(ctx, s, f, wait)
}

// readOwn reads s's own session after f.
func (h *Handler) readOwn(ctx context.Context, s *stream, f from, wait time.Duration) (batch, error) {
	for attempt := 0; ; attempt++ {
		if fr := s.frozen.Load(); fr != nil {
			return h.readFrozen(s, fr, f)
		}
		b, err := h.readSession(ctx, s, f, wait)
		if err == nil || attempt > 0 ||
			!errors.Is(err, eventbus.ErrSessionClosed) && !errors.Is(err, eventbus.ErrSessionNotFound) {
			return b, err
		}
		// The session is gone: closed by this handler (wait for the close
		// to finish freezing it) or by the application, or expired by the
		// bus. The latter two make the stream's EOF at its known tail.
		s.mu.Lock()
		h.closedElsewhereLocked(s)
		s.mu.Unlock()
	}
}

// closedElsewhereLocked records that s's session was closed (or expired)
// by the bus or another route, not by this handler: the stream is closed at
// the tail the handler knew, with nothing of its content held. s.mu held.
func (h *Handler) closedElsewhereLocked(s *stream) {
	if s.frozen.Load() == nil {
		s.frozen.Store(&frozen{from: s.tail.Load()})
		s.closed.Store(true)
	}
}

// readFrozen reads a closed stream's own items after f. The bus has no
// session to decide with, so it applies the bus's rules itself: an offset
// of another epoch is epoch_reset; one before what the stream kept is
// ring_evicted, unless the read is from the beginning.
func (h *Handler) readFrozen(s *stream, fr *frozen, f from) (batch, error) {
	switch {
	case f.epoch != "" && f.epoch != h.epoch:
		return batch{}, &eventbus.PositionLostError{ResyncData: frame.ResyncData{Reason: frame.ReasonEpochReset,
			LastDeliveredID: f.after, Epoch: h.epoch}}
	case f.after < fr.from && !f.start:
		return batch{}, &eventbus.PositionLostError{ResyncData: frame.ResyncData{Reason: frame.ReasonRingEvicted,
			LastDeliveredID: f.after, Epoch: h.epoch, CompleteFromID: fr.from + 1}}
	}
	after := max(f.after, fr.from)
	b := batch{start: after, next: after}
	size := 0
	for _, it := range fr.items {
		if it.id <= after {
			continue
		}
		if size > 0 && size+len(it.data) > h.chunk {
			b.more = true
			return b, nil
		}
		b.items = append(b.items, it)
		b.next, size = it.id, size+len(it.data)
	}
	b.next = max(b.next, s.tail.Load())
	b.closed = true
	return b, nil
}

// readSession reads s's bus session after f: a subscription with that
// cursor replays what the replay buffer holds after it, then (with wait)
// the first live events.
func (h *Handler) readSession(ctx context.Context, s *stream, f from, wait time.Duration) (batch, error) {
	sub, after, err := h.subscribe(ctx, s, f)
	if err != nil {
		return batch{}, err
	}
	defer sub.Close()
	b := batch{start: after, next: after}
	size := 0
	replayed := false
	var deadline time.Time
	for {
		var ev eventbus.Event
		switch {
		case !replayed:
			ev, err = sub.Next(ctx)
		case b.more:
			return h.finish(s, b), nil
		case len(b.items) > 0:
			var ok bool
			if ev, ok = sub.TryNext(); !ok {
				return h.finish(s, b), nil
			}
		case wait <= 0:
			return h.finish(s, b), nil
		default:
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			}
			ev, err = sub.NextBefore(deadline)
			if errors.Is(err, eventbus.ErrTimeout) {
				return h.finish(s, b), nil
			}
		}
		if err != nil {
			if errors.Is(err, eventbus.ErrSessionClosed) && replayed {
				b.closed = true
				return h.finish(s, b), nil
			}
			if len(b.items) > 0 {
				b.more = true
				return h.finish(s, b), nil
			}
			return batch{}, err
		}
		switch ev.Type {
		case frame.TypeReplayComplete:
			replayed = true
			continue
		case frame.TypeStateResyncRequired:
			// A lost position is Subscribe's error (StrictCursor), so this
			// is a replay cut by the replay budget or live events dropped:
			// the answer ends here and the next read goes on from it.
			b.more = true
			if replayed {
				return h.finish(s, b), nil
			}
			continue
		case frame.TypeSessionClosed:
			if ev.Session == s.id && ev.ID > 0 {
				b.closed = true
				return h.finish(s, b), nil
			}
			continue
		case frame.TypeClientEvicted:
			b.more = true
			return h.finish(s, b), nil
		}
		if ev.ID == 0 || ev.ID <= b.next {
			continue // another synthetic frame; a guard against repeats
		}
		data := h.itemData(s, ev)
		if size > 0 && size+len(data) > h.chunk {
			b.more = true
			return h.finish(s, b), nil
		}
		b.items = append(b.items, item{id: ev.ID, data: data})
		b.next, size = ev.ID, size+len(data)
	}
}

// finish records what b learnt about s's tail.
func (h *Handler) finish(s *stream, b batch) batch {
	s.setTail(b.next)
	if !b.more {
		b.next = max(b.next, s.tail.Load())
	}
	return b
}

// subscribe opens a subscription on s's session after f and returns it
// with the offset it follows. The bus decides whether the position is
// lost (StrictCursor): another epoch, or an id past its newest, is its
// epoch_reset; events after the offset evicted its ring_evicted — unless
// the read is from the stream's beginning, or what was lost is the
// session's history from before the stream (at or below s.floor): then
// the subscription follows the newest id lost, where nothing is missing.
func (h *Handler) subscribe(ctx context.Context, s *stream, f from) (*eventbus.Subscription, uint64, error) {
	off := false
	after := f.after
	for skips := 0; ; skips++ {
		sub, err := h.bus.Subscribe(ctx, s.id, eventbus.SubscribeOptions{
			Cursor:            &eventbus.Position{ID: after, Epoch: cmp.Or(f.epoch, h.epoch)},
			StrictCursor:      true,
			RequireSession:    true,
			Policy:            eventbus.DropSubscriber,
			SlowClientWarning: &off,
			Name:              "durable",
		})
		var lost *eventbus.PositionLostError
		if !errors.As(err, &lost) || lost.Reason != frame.ReasonRingEvicted {
			return sub, after, err
		}
		held := lost.CompleteFromID - 1 // the newest id lost: nothing after it is missing
		if !f.start && held > s.floor || skips == maxSkips {
			return nil, after, err
		}
		after = held
	}
}

// itemData is the bytes event ev stands for in stream s: an event of the
// handler's type is its payload as is — on a JSON stream when it is JSON,
// on a byte stream whatever it is (a byte payload's bytes, a JSON
// payload's text); any other event is its envelope, the one the SSE and
// WebSocket routes send (resume.AppendEnvelope, without an epoch: the
// offset has it), followed by a newline on a byte stream. The envelope
// has no "replay": a stream's bytes are the same read in catch-up or live.
func (h *Handler) itemData(s *stream, ev eventbus.Event) []byte {
	if ev.Type == h.opts.EventType && (!s.json || ev.IsJSON()) {
		return ev.Data
	}
	n := 64 + len(ev.Type) + len(ev.Session) + len(ev.Origin) + len(ev.Data)
	if !ev.IsJSON() {
		n += len(ev.Data)/3 + 48
	}
	ev.Replay = false
	b := resume.AppendEnvelope(make([]byte, 0, n), ev, "")
	if !s.json {
		b = append(b, '\n')
	}
	return b
}
