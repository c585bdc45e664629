package resume

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// CodeInvalidSnapshot answers 400 for a ?snapshot= other than 0 or 1.
const CodeInvalidSnapshot = "invalid_snapshot"

// parseSnapshot reads ?snapshot=1 (eventbus.SubscribeOptions.Snapshot:
// the application's state first, then the events after it; only where the
// bus has a snapshot provider).
func parseSnapshot(q url.Values, o *eventbus.SubscribeOptions) error {
	switch v := q.Get("snapshot"); v {
	case "", "0":
	case "1":
		o.Snapshot = true
	default:
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidSnapshot,
			Message: "invalid snapshot " + quote(v) + " (want 0 or 1)"}
	}
	return nil
}

// SnapshotCursor returns the id a snapshot frame (frame.TypeSnapshot, no
// id of its own) stands for: the lastEventId its state reflects, after
// which exactly the events follow — the client's cursor from that frame
// on, as a real event's id is. The SSE handler writes it on the frame's
// id: line (so a reconnecting EventSource sends it back, and resumes after
// the snapshot instead of being sent another); the WebSocket client takes
// it as its cursor. ok is false for every other frame and for a snapshot
// whose data holds no lastEventId.
func SnapshotCursor(ev eventbus.Event) (id uint64, ok bool) {
	if ev.ID != 0 || ev.Type != frame.TypeSnapshot {
		return 0, false
	}
	var d struct {
		LastEventID *uint64 `json:"lastEventId"`
	}
	if json.Unmarshal(ev.Data, &d) != nil || d.LastEventID == nil {
		return 0, false
	}
	return *d.LastEventID, true
}

// CodeInvalidTypes answers 400 for a ?types= list with an entry that is
// not an event type (white space or a control character inside it) or
// with more than 64 entries.
const CodeInvalidTypes = "invalid_types"

// parseTypes reads ?types=a,b (eventbus.SubscribeOptions.Types: the event
// types the client receives, in the replay and live): comma-separated,
// entries trimmed, empty entries skipped; absent or empty: every type.
func parseTypes(q url.Values, o *eventbus.SubscribeOptions) error {
	v := q.Get("types")
	if v == "" {
		return nil
	}
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Types = append(o.Types, t)
		}
	}
	// The check Subscribe makes (frame.CheckTypes); the message is the
	// text Subscribe's ErrInvalid gives, naming the bad entry.
	if err := frame.CheckTypes(o.Types); err != nil {
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidTypes,
			Message: "invalid types " + quote(v) + ": invalid argument: " + err.Error()}
	}
	return nil
}
