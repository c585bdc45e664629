package eventbus

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// A record is an event as the session logs and the subscriber queues hold
// it, an entry one slot of a subscriber queue (package internal/queue).
type (
	record = queue.Record
	entry  = queue.Entry
)

// fillEvent makes *ev the event r is (every field set), in place: the
// consumer's read path builds each Event once, in its caller's result, not
// in a temporary that is then copied (an Event is 128 bytes). Field by
// field, so that nothing is zeroed first and no 128-byte temporary is
// copied (with the GC's bulk write barrier while it marks); every field of
// Event is assigned (TestFillEventSetsEveryField).
func fillEvent(ev *Event, r *record, replay bool) {
	fillHead(ev, r)
	fillTail(ev, r.Ext, replay)
}

// fillHead and fillTail are fillEvent's two halves, each small enough for
// the compiler to inline (fillEvent as a whole is not), so that the replay
// loop (replayInto) builds its Events without a call per record; every
// field is assigned in one of the two.
func fillHead(ev *Event, r *record) {
	ev.ID = r.ID
	ev.Session = r.Session
	ev.Type = r.Type
	ev.Data = json.RawMessage(r.Data)
	ev.Time = time.Unix(0, r.Nanos)
}

// fillTail: see fillHead. x is the record's extension.
func fillTail(ev *Event, x *queue.Ext, replay bool) {
	ev.Replay = replay
	if x != nil {
		ev.Origin, ev.Count, ev.FirstID, ev.media = x.Origin, int(x.Count), x.FirstID, x.Media
	} else {
		ev.Origin, ev.Count, ev.FirstID, ev.media = "", 0, 0, 0
	}
}

// eventOf returns the event r is.
func eventOf(r *record, replay bool) Event {
	var ev Event
	fillEvent(&ev, r, replay)
	return ev
}

// fillEntry writes into ev what the consumer receives for e (see
// fillEvent); an events_dropped or feed_gap frame is encoded now.
func fillEntry(ev *Event, e *entry) {
	fillEvent(ev, e.Rec, false)
	if e.Kind == queue.KindDropped || e.Kind == queue.KindGap {
		ev.Data = e.Data()
	}
}

// recordOf is the record a backend stores for ev (its ID 0 unless set).
func recordOf(ev *Event) backend.Record {
	r := backend.Record{ID: ev.ID, Type: ev.Type, Data: ev.Data, Time: ev.Time, Origin: ev.Origin}
	if ev.media != 0 {
		r.ContentType = mediaName(ev.media)
	}
	return r
}

// mustJSON encodes one of the package's own frame payloads, which cannot
// fail; synth builds a synthetic frame entry (id 0).
var (
	mustJSON = queue.MustJSON
	synth    = queue.Synth
)

// extOf returns the record extension carrying origin and the interned
// media type (media.go), or nil when both are empty (a JSON event without
// an origin: the common case allocates nothing).
func extOf(origin string, media uint32) *queue.Ext {
	if origin == "" && media == 0 {
		return nil
	}
	return &queue.Ext{Origin: origin, Media: media}
}

// mediaOf is r's interned media type, 0 for JSON.
func mediaOf(r *record) uint32 {
	if r.Ext == nil {
		return 0
	}
	return r.Ext.Media
}

// replayCompleteEntry is synth for the replay_complete frame (first: the
// first replayed id, 0 for none; lost: HistoryLost), its payload
// (frame.ReplayCompleteData) encoded by hand into the same allocation as
// its record: one allocation per resume instead of three (the record,
// encoding/json's result and the boxed argument), and no reflection.
// TestReplayCompleteEntryEncoding pins the bytes to encoding/json's.
func replayCompleteEntry(session string, last uint64, n int, first uint64, lost bool, nanos int64) entry {
	const (
		head   = `{"lastReplayedEventId":`
		mid    = `,"replayedCount":`
		firstK = `,"firstReplayedEventId":`
		lostK  = `,"historyLost":true`
	)
	p := new(struct {
		r record
		b [len(head) + 20 + len(mid) + 20 + len(firstK) + 20 + len(lostK) + 1]byte // 20: the longest uint64 or int64 in decimal
	})
	d := append(p.b[:0], head...)
	d = strconv.AppendUint(d, last, 10)
	d = append(d, mid...)
	d = strconv.AppendInt(d, int64(n), 10)
	if first != 0 {
		d = append(d, firstK...)
		d = strconv.AppendUint(d, first, 10)
	}
	if lost {
		d = append(d, lostK...)
	}
	d = append(d, '}')
	p.r = record{Session: session, Type: frame.TypeReplayComplete, Data: d[:len(d):len(d)], Nanos: nanos}
	return entry{Rec: &p.r, Kind: queue.KindFrame}
}
