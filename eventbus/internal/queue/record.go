package queue

import (
	"encoding/json"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Record is an event as the session logs and the subscriber queues hold
// it: shared by all of them, never modified once published.
type Record struct {
	ID      uint64
	Session string
	Type    string
	Data    []byte
	Ext     *Ext  // nil for none (no origin, not compacted): keeps the record at 80 bytes, a size class
	Nanos   int64 // Unix nanoseconds
}

// Ext is what few records carry: the origin, the media type of a payload
// that is not JSON, and for a record a compacting log replays in place of
// several (package store), how many it holds and the first one's id.
type Ext struct {
	Origin string
	// Media is the payload's media type as package eventbus interns it
	// (its Event.ContentType); 0 for JSON. A record with Media ≠ 0 is
	// never compacted. It shares a word with Count, so Ext stays 48
	// bytes (a size class).
	Media   uint32
	Count   int32  // ≥ 2 for a compacted record (at most 4,096 parts), else 0
	FirstID uint64 // the first id a compacted record holds, else 0
	// Fold, on a record a snapshot copied from a compacting log, merges
	// its parts on demand, outside the session's lock: the record's Data
	// is nil until the records Fold.Merge returns replace it.
	Fold Folded
}

// Folded is a compacted record whose payload is merged when it is read
// (package store): Merge returns the records it replays as — one merged
// record, or its parts one by one when they do not merge. Safe to call
// without the lock of the session, once.
type Folded interface {
	Merge() []*Record
}

// Origin returns the record's origin, "" for none.
func (r *Record) Origin() string {
	if r.Ext == nil {
		return ""
	}
	return r.Ext.Origin
}

// RecordID is a record's id, for the logs (store.NewRing).
func RecordID(r **Record) uint64 { return (*r).ID }

// Kind tells how a queued entry counts and how it turns into a frame.
type Kind uint8

const (
	KindLive     Kind = iota // a live event: counts against the live limits
	KindForced               // a real event that must arrive (session_closed), never counts
	KindFrame                // a synthetic frame with its data already encoded
	KindDropped              // an events_dropped frame, encoded when read
	KindTargeted             // a targeted frame (SendTo): no id, counts against the live limits, never dropped by drop_oldest
	KindGap                  // a feed_gap frame, encoded when read
)

// Entry is one slot of a subscriber queue.
type Entry struct {
	Rec  *Record // shared by the logs and every queue; never modified
	Kind Kind
	Drop *Drop // KindDropped and KindGap only
}

// Drop accumulates one run of events dropped for one subscriber (or one
// gap); the publisher extends it while it is still queued, the consumer
// encodes it.
type Drop struct {
	// LastDelivered is filled in by the consumer as it reads the frame:
	// the last id it actually received. Known for sure only then, since a
	// later drop_oldest may still drop the events queued before the run.
	LastDelivered uint64
	First, Last   uint64
	Count         int
	// Earliest is the first id after the gap (KindGap only).
	Earliest uint64
}

// Counts reports whether the entry counts against the live limits.
func (e *Entry) Counts() bool { return e.Kind == KindLive || e.Kind == KindTargeted }

// Cost is the entry's size against the byte limit.
func (e *Entry) Cost() int64 { return int64(len(e.Rec.Data)) }

// Data returns the payload the consumer receives for the entry: the
// record's, or for a Dropped or Gap entry its resync frame, encoded now.
func (e *Entry) Data() []byte {
	switch e.Kind {
	case KindDropped:
		return MustJSON(frame.ResyncData{
			Reason:          frame.ReasonEventsDropped,
			LastDeliveredID: e.Drop.LastDelivered,
			FirstDroppedID:  e.Drop.First,
			LastDroppedID:   e.Drop.Last,
			DroppedCount:    e.Drop.Count,
		})
	case KindGap:
		return MustJSON(frame.ResyncData{
			Reason:          frame.ReasonFeedGap,
			LastDeliveredID: e.Drop.LastDelivered,
			CompleteFromID:  e.Drop.Earliest,
		})
	}
	return e.Rec.Data
}

// MustJSON encodes one of the bus's own frame payloads, which cannot fail.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("eventbus: encoding a frame: " + err.Error())
	}
	return b
}

// Synth builds a synthetic frame entry (id 0) for session.
func Synth(session, typ string, data any, nanos int64) Entry {
	return Entry{Rec: &Record{Session: session, Type: typ, Data: MustJSON(data), Nanos: nanos}, Kind: KindFrame}
}
