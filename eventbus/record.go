package eventbus

import (
	"encoding/json"
	"time"

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
	ev.ID = r.ID
	ev.Session = r.Session
	ev.Type = r.Type
	ev.Data = json.RawMessage(r.Data)
	ev.Time = time.Unix(0, r.Nanos)
	ev.Replay = replay
	if x := r.Ext; x != nil {
		ev.Origin, ev.Count, ev.FirstID = x.Origin, x.Count, x.FirstID
	} else {
		ev.Origin, ev.Count, ev.FirstID = "", 0, 0
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

// mustJSON encodes one of the package's own frame payloads, which cannot
// fail; synth builds a synthetic frame entry (id 0).
var (
	mustJSON = queue.MustJSON
	synth    = queue.Synth
)

// originRef returns the record extension carrying origin, or nil when it
// is empty.
func originRef(origin string) *queue.Ext {
	if origin == "" {
		return nil
	}
	return &queue.Ext{Origin: origin}
}
