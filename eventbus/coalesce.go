package eventbus

import (
	"context"
	"encoding/json"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Coalescer decides which events a coalescing subscription merges and how.
// Package coalesce implements it with rule sets (for the Agent Client
// Protocol's session/update shapes, for AgentPool's event shapes, and
// coalesce.New for rules of your own).
//
// The bus calls it only on the consumer's goroutine, only for real events
// (never for a synthetic frame or session_closed), and never concurrently
// for one subscription; a Coalescer shared by many subscriptions must be
// safe for concurrent use. It must not panic, block, or modify ev.Data.
type Coalescer interface {
	// Key returns ev's merge key, or "" when ev passes through unmerged.
	// Consecutive events with the same non-empty key, the same session,
	// type and origin, and the same Replay flag are merged. drop reports
	// an event that carries nothing and is left out altogether.
	Key(ev Event) (key string, drop bool)
	// Merge returns the payload of the one event that replaces evs: two or
	// more consecutive events that all had merge key key, oldest first.
	// The merged event takes everything else from the last of them. On an
	// error the events are delivered one by one, unmerged.
	Merge(key string, evs []Event) (json.RawMessage, error)
}

// maxThrottle is the largest [SubscribeOptions.Throttle] in process; the
// streaming adapters bound what a client may ask for lower (5 s).
const maxThrottle = time.Minute

// A merged group is handed out once it holds this many events or bytes of
// data, even while more of the same key is queued: it bounds what one
// consumer holds and how large one merged frame gets.
const (
	maxGroupEvents = 4096
	maxGroupBytes  = 1 << 20
)

// coalescing is the consumer-side state of a coalescing subscription; only
// the reading goroutine touches it.
type coalescing struct {
	c      Coalescer
	window time.Duration

	group []Event // the held run of mergeable events, oldest first
	key   string  // its merge key
	bytes int     // its data bytes
	until time.Time
	last  time.Time // when the previous throttled group was handed out

	peek    Event // an event taken after the group, handed out next
	hasPeek bool
	out     []Event // events whose merge failed, handed out one by one
	timer   *time.Timer
}

// source is where pull takes frames from: a Subscription, or a slice for
// [Coalesce].
type source interface {
	rawTake() (Event, bool)
}

type sliceSource struct{ evs []Event }

func (s *sliceSource) rawTake() (Event, bool) {
	if len(s.evs) == 0 {
		return Event{}, false
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, true
}

// Coalesce merges a batch of frames as a coalescing subscription merges its
// queue: consecutive events with the same merge key, session, type, origin
// and Replay flag become one carrying the last one's ID, Count and FirstID;
// events c drops are left out; frames with ID 0 and session_closed pass.
// evs is not modified. Safe for concurrent use when c is.
func Coalesce(c Coalescer, evs []Event) []Event {
	co := &coalescing{c: c}
	src := &sliceSource{evs: evs}
	var out []Event
	for {
		ev, ok := co.pull(src, true)
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// setCoalescing validates the coalescing options and turns them on.
func (s *Subscription) setCoalescing(o SubscribeOptions) error {
	if o.Throttle < 0 || o.Throttle > maxThrottle {
		return invalidf("Throttle %v out of range [0, %v]", o.Throttle, maxThrottle)
	}
	if o.Coalesce == nil {
		if o.Throttle != 0 {
			return invalidf("Throttle %v without Coalesce", o.Throttle)
		}
		return nil
	}
	s.co = &coalescing{c: o.Coalesce, window: o.Throttle}
	return nil
}

// rawTake returns the next frame the consumer has, swapping in the queued
// ones when its local batch is spent, without blocking.
func (s *Subscription) rawTake() (ev Event, ok bool) {
	for {
		if s.reinsert(&ev) {
			return ev, true
		}
		s.mu.Lock()
		if !s.q.Pending() || s.discard.Load() {
			s.mu.Unlock()
			return Event{}, false
		}
		s.drain()
		s.mu.Unlock()
	}
}

// pull is the non-blocking part of a coalescing read: it takes everything
// already queued, merging as it goes, until it has a frame to hand out.
// ok is false when nothing is due: nothing is queued, and a held group (if
// any) waits for its throttle window. force hands out a held group at once.
func (co *coalescing) pull(s source, force bool) (Event, bool) {
	for {
		if len(co.out) > 0 {
			ev := co.out[0]
			co.out[0] = Event{}
			co.out = co.out[1:]
			return ev, true
		}
		var ev Event
		var ok bool
		if co.hasPeek {
			ev, ok = co.peek, true
			co.peek, co.hasPeek = Event{}, false
		} else {
			ev, ok = s.rawTake()
		}
		if !ok {
			if len(co.group) == 0 {
				return Event{}, false
			}
			if force || co.until.IsZero() || !time.Now().Before(co.until) {
				return co.flush(), true
			}
			return Event{}, false
		}
		// Synthetic frames (resync, gaps, replay_complete, warnings),
		// session_closed and byte payloads (the rule sets merge JSON) never
		// merge, so they end any group before them.
		key := ""
		if ev.ID != 0 && ev.Type != frame.TypeSessionClosed && ev.media == 0 {
			var drop bool
			key, drop = co.c.Key(ev)
			if drop {
				continue
			}
		}
		if len(co.group) > 0 {
			if key != "" && key == co.key && co.fits(ev) {
				co.group = append(co.group, ev)
				co.bytes += len(ev.Data)
				continue
			}
			co.peek, co.hasPeek = ev, true
			return co.flush(), true
		}
		if key == "" {
			return ev, true
		}
		co.group = append(co.group, ev)
		co.key, co.bytes = key, len(ev.Data)
		co.until = time.Time{}
		if co.window > 0 && !ev.Replay {
			// At most one send per window; the first delta
			// after a quiet window goes out as soon as the queue is empty.
			co.until = co.last.Add(co.window)
		}
	}
}

// fits reports whether ev may join the held group: never across sessions
// (a parent's and a child's deltas are not one event), types, origins or
// replay/live, and not past the group bounds.
func (co *coalescing) fits(ev Event) bool {
	g := &co.group[0]
	return ev.Session == g.Session && ev.Type == g.Type && ev.Origin == g.Origin && ev.Replay == g.Replay &&
		len(co.group) < maxGroupEvents && co.bytes+len(ev.Data) <= maxGroupBytes
}

// flush hands out the held group as one event carrying the last merged id.
func (co *coalescing) flush() Event {
	g := co.group
	ev := g[0]
	if n := len(g); n > 1 {
		data, err := co.c.Merge(co.key, g)
		if err != nil || len(data) == 0 {
			co.out = append(co.out, g[1:]...)
		} else {
			ev = g[n-1]
			// A replayed record a compacting log folded already holds
			// Count events from FirstID on.
			count := 0
			for i := range g {
				count += max(g[i].Count, 1)
			}
			first := g[0].ID
			if g[0].FirstID != 0 {
				first = g[0].FirstID
			}
			ev.Data, ev.Count, ev.FirstID = data, count, first
		}
	}
	if co.window > 0 && !g[0].Replay {
		co.last = time.Now()
	}
	clear(g)
	co.group, co.key, co.bytes = g[:0], "", 0
	if cap(co.group) > 256 {
		co.group = nil // do not keep a burst-sized buffer
	}
	return ev
}

// nextMergedBefore is nextBefore for a coalescing subscription: it returns
// ErrTimeout once the deadline dl (deadline queue clock, 0 none) has passed with nothing
// due (NextBefore); a held group stays held.
func (s *Subscription) nextMergedBefore(ctx context.Context, abandon <-chan struct{}, dl int64) (Event, error) {
	co := s.co
	for {
		if ev, ok := co.pull(s, false); ok {
			return ev, nil
		}
		s.mu.Lock()
		if s.q.Pending() && !s.discard.Load() {
			s.mu.Unlock()
			continue
		}
		if s.ended {
			// The end flushes: what the consumer already took (a held
			// group, the frame after it) comes before the reason.
			err := s.reason
			s.mu.Unlock()
			if ev, ok := co.pull(s, true); ok {
				return ev, nil
			}
			return Event{}, err
		}
		parked := s.parkLocked(dl)
		s.mu.Unlock()
		if !parked {
			return Event{}, ErrTimeout
		}
		var timer <-chan time.Time
		if len(co.group) > 0 {
			// Only a consumer that holds a group waits on a timer; an idle
			// subscriber holds none.
			d := time.Until(co.until)
			if co.timer == nil {
				co.timer = time.NewTimer(d)
			} else {
				co.timer.Reset(d)
			}
			timer = co.timer.C
		}
		select {
		case <-s.wake:
		case <-timer:
			timer = nil
			s.stopWaiting()
		case <-abandon:
			s.stopWaiting()
			co.stopTimer(timer)
			s.mu.Lock()
			err := s.reason
			s.mu.Unlock()
			return Event{}, err
		case <-ctx.Done():
			s.stopWaiting()
			co.stopTimer(timer)
			if len(co.group) > 0 {
				return co.flush(), nil // the caller's context end flushes too
			}
			return Event{}, ctx.Err()
		}
		co.stopTimer(timer)
	}
}

func (co *coalescing) stopTimer(c <-chan time.Time) {
	if c != nil {
		co.timer.Stop()
	}
}

// tryNextMerged is TryNext for a coalescing subscription: a group still in
// its throttle window is not due, unless the subscription has ended.
func (s *Subscription) tryNextMerged() (Event, bool) {
	if ev, ok := s.co.pull(s, false); ok {
		return ev, true
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended {
		return s.co.pull(s, true)
	}
	return Event{}, false
}
