package resume

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// CodeInvalidSnapshot answers 400 for a ?snapshot= other than 0 or 1.
const CodeInvalidSnapshot = "invalid_snapshot"

// parseSnapshot reads ?snapshot=1 (eventbus.SubscribeOptions.Snapshot:
// the application's state first, then the events after it; only where the
// bus has a snapshot provider).
func parseSnapshot(q url.Values, o *eventbus.SubscribeOptions) *StatusError {
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

// CodeInvalidTypes answers 400 for a ?types= list with an entry that is
// not an event type (white space or a control character inside it) or
// with more than 64 entries.
const CodeInvalidTypes = "invalid_types"

// parseTypes reads ?types=a,b (eventbus.SubscribeOptions.Types: the event
// types the client receives, in the replay and live): comma-separated,
// entries trimmed, empty entries skipped; absent or empty: every type.
func parseTypes(q url.Values, o *eventbus.SubscribeOptions) *StatusError {
	v := q.Get("types")
	if v == "" {
		return nil
	}
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Types = append(o.Types, t)
		}
	}
	// The bus checks the entries exactly as Subscribe will (a dry run on
	// a fresh option set); its message names the bad entry.
	if err := eventbus.CheckTypes(o.Types); err != nil {
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidTypes,
			Message: "invalid types " + quote(v) + ": " + textutil.PublicMessage(err)}
	}
	return nil
}
