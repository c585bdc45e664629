package durable

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// item is one unit of a stream as Durable Streams sees it: the bytes of
// one bus event (one JSON message of a JSON stream, one append's bytes of
// any other stream) and the id of that event, which is its offset.
type item struct {
	id   uint64
	data []byte
}

// frozen is a closed stream's content, taken from its session when the
// stream closed (the bus frees a closed root session's replay buffer).
type frozen struct {
	items []item
	from  uint64 // every own item after from is in items; before it: 410
}

// closeTuple is the idempotent producer request that closed a stream.
type closeTuple struct {
	id          string
	epoch, seq  uint64
	hadProducer bool
}

// stream is the handler's record of one Durable Stream: its configuration
// and writer state. Its data lives in the bus session id (and, for a fork,
// in its source up to forkAt).
type stream struct {
	id    string // the bus session id (the path below the prefix)
	gen   uint64 // unique per record: names it in ETags
	ctype string // the content type as created
	media string // the media type its appends are published with (byte streams; registry.go)
	json  bool   // application/json: message mode (PROTOCOL.md §9.1)
	text  bool   // text/* or JSON: SSE sends it as text, else base64

	ttl       int64        // Stream-TTL in seconds; 0 none
	expiresAt time.Time    // Stream-Expires-At; zero none
	access    atomic.Int64 // Unix ns of the last read or write (the sliding TTL)
	seen      atomic.Int64 // Unix ns of the last request of any kind
	implicit  bool         // made for a session of another route, not by a PUT

	base uint64        // own events have ids > base
	tail atomic.Uint64 // the newest offset known

	src        *stream // a fork's source; nil for a plain stream
	forkAt     uint64  // a fork inherits the source's items with id ≤ forkAt
	forkFrom   string  // Stream-Forked-From as given (idempotent PUT compares it)
	forkOffset uint64  // Stream-Fork-Offset resolved (before the sub-offset)
	forkSub    int64   // Stream-Fork-Sub-Offset

	mu       sync.Mutex // serialises appends, close and the producer checks
	closed   atomic.Bool
	closedBy closeTuple
	lastSeq  string
	frozen   atomic.Pointer[frozen]
	partials map[string]partialAppend // by producer id: appends failed part-way (partial.go)

	// Under Handler.mu.
	refs    int  // forks whose source this is
	deleted bool // soft-deleted: gone for clients, kept for its forks
}

// expired reports whether s's TTL or expiry time has passed at now.
func (s *stream) expired(now time.Time) bool {
	if !s.expiresAt.IsZero() && !now.Before(s.expiresAt) {
		return true
	}
	return s.ttl > 0 && now.UnixNano()-s.access.Load() >= s.ttl*int64(time.Second)
}

// touch restarts s's sliding TTL (every read and write; HEAD does not).
func (s *stream) touch() { s.access.Store(time.Now().UnixNano()) }

// setTail raises s's known tail to id.
func (s *stream) setTail(id uint64) {
	for {
		t := s.tail.Load()
		if id <= t || s.tail.CompareAndSwap(t, id) {
			return
		}
	}
}

// start is the offset id a read from the beginning ("-1") starts after.
func (s *stream) start() uint64 {
	for s.src != nil {
		s = s.src
	}
	return s.base
}

// ownStart is the id the stream's own events come after.
func (s *stream) ownStart() uint64 {
	if s.src != nil {
		return s.forkAt
	}
	return s.base
}

// batch is the result of one read.
type batch struct {
	items  []item
	next   uint64 // the offset after the batch
	more   bool   // stopped early (chunk size, replay budget): not up to date
	closed bool   // the stream is closed and next is its final offset
}

// errGone reports an offset whose events the bus no longer holds
// (ring_evicted) or that belongs to another epoch: 410 Gone.
var errGone = errors.New("durable: offset before the retained history")

// read returns s's items after offset after, waiting up to wait for the
// first one when none is there yet (0: no wait). A fork reads its source
// up to forkAt first; its waits are for its own appends only.
func (h *Handler) read(ctx context.Context, s *stream, after uint64, wait time.Duration) (batch, error) {
	if s.src != nil && after < s.forkAt {
		b, err := h.read(ctx, s.src, after, 0)
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
		if len(b.items) == 0 {
			return h.read(ctx, s, s.forkAt, wait)
		}
		own, err := h.readOwn(ctx, s, s.forkAt, 0)
		if err != nil {
			return batch{}, err
		}
		own.items = append(b.items, own.items...)
		return own, nil
	}
	return h.readOwn(ctx, s, max(after, s.ownStart()), wait)
}

// readOwn reads s's own session after id after.
func (h *Handler) readOwn(ctx context.Context, s *stream, after uint64, wait time.Duration) (batch, error) {
	for attempt := 0; ; attempt++ {
		if f := s.frozen.Load(); f != nil {
			return h.readFrozen(s, f, after)
		}
		b, err := h.readSession(ctx, s, after, wait)
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

// readFrozen reads a closed stream's own items after id after.
func (h *Handler) readFrozen(s *stream, f *frozen, after uint64) (batch, error) {
	if after < f.from {
		return batch{}, errGone
	}
	b := batch{next: after}
	size := 0
	for _, it := range f.items {
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

// readSession reads s's bus session after id after: a subscription with
// that cursor replays what the replay buffer holds after it, then (with
// wait) the first live events.
func (h *Handler) readSession(ctx context.Context, s *stream, after uint64, wait time.Duration) (batch, error) {
	sub, err := h.subscribe(ctx, s.id, after)
	if err != nil {
		return batch{}, err
	}
	defer sub.Close()
	b := batch{next: after}
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
		case frame.TypeStateResyncRequired, frame.TypeSnapshot: // a provider's state in place of a lost position: not the bytes
			var d frame.ResyncData // a snapshot's reason is ring_evicted or epoch_reset
			_ = json.Unmarshal(ev.Data, &d)
			switch d.Reason {
			case frame.ReasonRingEvicted, frame.ReasonEpochReset:
				if len(b.items) == 0 {
					return batch{}, errGone
				}
				b.more = true
				return h.finish(s, b), nil
			default: // replay budget, live drops: read on from the next offset
				b.more = true
				if replayed {
					return h.finish(s, b), nil
				}
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

// subscribe opens a subscription on session id with cursor after.
func (h *Handler) subscribe(ctx context.Context, id string, after uint64) (*eventbus.Subscription, error) {
	off := false
	return h.bus.Subscribe(ctx, id, eventbus.SubscribeOptions{
		Cursor:            &eventbus.Position{ID: after, Epoch: h.epoch},
		RequireSession:    true,
		Policy:            eventbus.DropSubscriber,
		SlowClientWarning: &off,
		Name:              "durable",
	})
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

// publish appends one item's bytes to s's session and returns its id;
// opts go to the bus (eventbus.WithProducer).
func (h *Handler) publish(s *stream, data []byte, opts ...eventbus.PublishOption) (uint64, error) {
	opts = append(opts, eventbus.Existing())
	var ev eventbus.Event
	var err error
	if s.json {
		ev, err = h.bus.PublishJSON(s.id, h.opts.EventType, data, opts...)
	} else {
		ev, err = h.bus.PublishBytes(s.id, h.opts.EventType, s.media, data, opts...)
	}
	if err != nil {
		return 0, err
	}
	s.setTail(ev.ID)
	return ev.ID, nil
}

// freeze closes s's session and keeps what it held as s's final content:
// a closed root session's replay buffer is freed by the bus, and a closed
// stream stays readable. Called with s.mu held.
func (h *Handler) freeze(ctx context.Context, s *stream) error {
	if s.frozen.Load() != nil {
		return nil
	}
	f := &frozen{from: s.ownStart()}
	after := f.from
	for {
		b, err := h.readSession(ctx, s, after, 0)
		if errors.Is(err, errGone) {
			// Evicted before the close: keep what is held, from the
			// oldest event on.
			b, err = h.readHeld(ctx, s)
			if err == nil && len(b.items) > 0 {
				f.from = b.items[0].id - 1
			}
		}
		if err != nil && !errors.Is(err, eventbus.ErrSessionClosed) && !errors.Is(err, eventbus.ErrSessionNotFound) {
			return err
		}
		f.items = append(f.items, b.items...)
		if n := len(b.items); n > 0 {
			after = b.items[n-1].id
		}
		if err != nil || !b.more || len(b.items) == 0 {
			break
		}
	}
	// Events published between the reads above and the close come through
	// this subscription, up to the session_closed.
	sub, err := h.subscribe(ctx, s.id, after)
	if err == nil {
		defer sub.Close()
	}
	if cerr := h.bus.CloseSession(s.id); cerr != nil {
		return cerr
	}
	for err == nil {
		ev, nerr := sub.NextBefore(time.Now().Add(5 * time.Second))
		if nerr != nil || ev.Type == frame.TypeSessionClosed && ev.ID > 0 {
			break
		}
		if ev.ID > after && !frame.Reserved(ev.Type) {
			f.items = append(f.items, item{id: ev.ID, data: h.itemData(s, ev)})
			after = ev.ID
		}
	}
	if n := len(f.items); n > 0 {
		s.setTail(f.items[n-1].id)
	}
	s.frozen.Store(f)
	return nil
}

// readHeld reads what s's session holds, whatever was evicted before.
func (h *Handler) readHeld(ctx context.Context, s *stream) (batch, error) {
	sub, err := h.bus.Subscribe(ctx, s.id, eventbus.SubscribeOptions{RequireSession: true, Name: "durable"})
	if err != nil {
		return batch{}, err
	}
	defer sub.Close()
	var b batch
	for {
		ev, ok := sub.TryNext()
		if !ok || ev.Type == frame.TypeReplayComplete {
			return b, nil
		}
		if ev.ID > s.ownStart() && !frame.Reserved(ev.Type) {
			b.items = append(b.items, item{id: ev.ID, data: h.itemData(s, ev)})
		}
	}
}

// tailOf returns s's tail offset, reading what other publishers added.
func (h *Handler) tailOf(ctx context.Context, s *stream) (uint64, error) {
	if s.frozen.Load() != nil {
		return s.tail.Load(), nil
	}
	for range 64 {
		b, err := h.readOwn(ctx, s, max(s.tail.Load(), s.ownStart()), 0)
		if err != nil {
			return 0, err
		}
		if !b.more {
			break
		}
	}
	return s.tail.Load(), nil
}

// etag is a catch-up response's entity tag: the stream record, the start
// and end offsets, and ":c" once the stream is closed (PROTOCOL.md §10.1).
func etag(s *stream, start, end string, closed bool) string {
	t := `"` + strconv.FormatUint(s.gen, 36) + ":" + start + ":" + end
	if closed {
		t += ":c"
	}
	return t + `"`
}
