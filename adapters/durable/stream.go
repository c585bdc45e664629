package durable

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	text  bool   // JSON, or text/* of UTF-8 (utf8Charset): SSE sends it as text, else base64

	ttl       int64        // Stream-TTL in seconds; 0 none
	expiresAt time.Time    // Stream-Expires-At; zero none
	access    atomic.Int64 // Unix ns of the last read or write (the sliding TTL)
	seen      atomic.Int64 // Unix ns of the last request of any kind
	implicit  bool         // made for a session of another route, not by a PUT

	base  uint64        // own events have ids > base
	floor uint64        // history the bus marks lost up to here was never the stream's (its session's earlier lives)
	tail  atomic.Uint64 // the newest offset known

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
	h.cnt.appended.Add(1)
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
	for first := true; ; first = false {
		// From the stream's beginning: what the bus evicted before the
		// close is gone, and the content starts at the oldest event held.
		b, err := h.readSession(ctx, s, from{after: after, start: first}, 0)
		if err != nil && !errors.Is(err, eventbus.ErrSessionClosed) && !errors.Is(err, eventbus.ErrSessionNotFound) {
			return err
		}
		if first && err == nil {
			f.from = b.start
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
	sub, _, err := h.subscribe(ctx, s, from{after: after})
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

// tail is s's tail: the newest id of its session as the bus has it
// (Bus.SessionInfo; never before the stream's own start), or, for a closed
// stream, the offset it closed at. It asks the bus, never walks history, so
// it answers at once however many events other routes published. A session
// the bus no longer has was closed or expired by another route: the stream
// is closed at the tail the handler knew (deviation 6). s.mu must not be
// held (tailLocked: held).
func (h *Handler) tail(s *stream) uint64 {
	if t, ok := h.liveTail(s); ok {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return h.tailLocked(s)
}

// tailLocked is tail with s.mu held.
func (h *Handler) tailLocked(s *stream) uint64 {
	if t, ok := h.liveTail(s); ok {
		return t
	}
	h.closedElsewhereLocked(s)
	return s.tail.Load()
}

// liveTail is tail for a stream whose session the bus has; false for a
// closed stream or a session the bus no longer has. It takes no lock.
func (h *Handler) liveTail(s *stream) (uint64, bool) {
	if s.frozen.Load() != nil {
		return 0, false
	}
	info, ok := h.bus.SessionInfo(s.id)
	if !ok {
		return 0, false
	}
	s.setTail(max(info.LastEventID, s.ownStart()))
	return s.tail.Load(), true
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
