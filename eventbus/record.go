package eventbus

import (
	"encoding/json"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// record is an event as the replay buffer and the subscriber queues hold it.
// It is copied by value; data is shared and never modified.
type record struct {
	id      uint64
	session string
	typ     string
	data    []byte
	origin  *string // nil for none: keeps the record at 80 bytes, a size class
	nanos   int64   // Unix nanoseconds
}

func recordID(r **record) uint64 { return (*r).id }

func (r *record) event(replay bool) Event {
	var ev Event
	r.fill(&ev, replay)
	return ev
}

// fill makes *ev the event r is (every field set), in place: the consumer's
// read path builds each Event once, in its caller's result, not in a
// temporary that is then copied (an Event is 128 bytes).
func (r *record) fill(ev *Event, replay bool) {
	*ev = Event{
		ID:      r.id,
		Session: r.session,
		Type:    r.typ,
		Data:    json.RawMessage(r.data),
		Time:    time.Unix(0, r.nanos),
		Origin:  originOf(r.origin),
		Replay:  replay,
	}
}

// entryKind tells how a queued entry counts and how it turns into an Event.
type entryKind uint8

const (
	entryLive     entryKind = iota // a live event: counts against the live limits
	entryForced                    // a real event that must arrive (session_closed), never counts
	entryFrame                     // a synthetic frame with its data already encoded
	entryDropped                   // an events_dropped frame, encoded when read
	entryTargeted                  // a targeted frame (SendTo): no id, counts against the live limits, never dropped by drop_oldest
	entryGap                       // a feed_gap frame (gap.go), encoded when read
)

// entry is one slot of a subscriber queue.
type entry struct {
	rec  *record // shared by the replay buffer and every queue; never modified
	kind entryKind
	drop *dropInfo // entryDropped and entryGap only
}

// dropInfo accumulates one run of events dropped for one subscriber; the
// publisher extends it while it is still queued, the consumer encodes it.
type dropInfo struct {
	// lastDelivered is filled in by the consumer as it reads the frame: the
	// last id it actually received. Known for sure only then, since a later
	// drop_oldest may still drop the events queued before the run.
	lastDelivered uint64
	first, last   uint64
	count         int
	// earliest is the first id after the gap (entryGap only).
	earliest uint64
}

func (e *entry) counts() bool { return e.kind == entryLive || e.kind == entryTargeted }

func (e *entry) cost() int64 { return int64(len(e.rec.data)) }

// fill writes into ev what the consumer receives for the entry (see
// record.fill).
func (e *entry) fill(ev *Event) {
	e.rec.fill(ev, false)
	switch e.kind {
	case entryDropped:
		ev.Data = mustJSON(frame.ResyncData{
			Reason:          frame.ReasonEventsDropped,
			LastDeliveredID: e.drop.lastDelivered,
			FirstDroppedID:  e.drop.first,
			LastDroppedID:   e.drop.last,
			DroppedCount:    e.drop.count,
		})
	case entryGap:
		ev.Data = mustJSON(frame.ResyncData{
			Reason:          frame.ReasonFeedGap,
			LastDeliveredID: e.drop.lastDelivered,
			CompleteFromID:  e.drop.earliest,
		})
	}
}

// mustJSON encodes one of the package's own frame payloads, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("eventbus: encoding a frame: " + err.Error())
	}
	return b
}

// frame builds a synthetic frame record (id 0) for session.
func synth(session, typ string, data any, nanos int64) entry {
	return entry{rec: &record{session: session, typ: typ, data: mustJSON(data), nanos: nanos}, kind: entryFrame}
}

// originRef returns a pointer to origin, or nil when it is empty.
func originRef(origin string) *string {
	if origin == "" {
		return nil
	}
	p := new(string) // not &origin: that would move origin to the heap on every call
	*p = origin
	return p
}

func originOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
