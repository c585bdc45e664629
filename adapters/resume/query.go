package resume

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/replaybus/replaybus/internal/textutil"
)

// CodeUnknownParameter answers 400 for a query parameter that the endpoint
// does not know but that looks like one it does (lastEventID,
// last-event-id, maxQueue, scopes, …), or, under [QueryRules].Strict, for
// any parameter it does not know.
const CodeUnknownParameter = "unknown_query_parameter"

// knownParams are the query parameter names the subscribe endpoint (SSE
// and WebSocket alike) reads, exactly as they must be spelled.
var knownParams = [...]string{"scope", "maxQueued", "replay", "events", "lastEventId", "last_event_id", "coalesce", "throttle", "types", "snapshot"}

// QueryRules say what [ParseRequest] does with a query parameter that is
// not one the endpoint reads (scope, maxQueued, replay, events,
// lastEventId, last_event_id, coalesce, throttle, types, snapshot). The zero value is the default: such a
// parameter is ignored — embedders put their own on the URL (?token=, a
// cache-buster such as ?_=1712…) — unless it looks like a misspelling of a
// known one, which is refused so that a resume the client asked for is
// never silently dropped.
//
// "Looks like" means: equal to a known name once case and the separators
// '-', '_', '.' and ' ' are ignored (lastEventID, last-event-id,
// Last-Event-ID, MAXQUEUED), or within a small edit distance of one
// (adjacent transpositions count as one edit): 1 for names of up to 6
// letters (scope, replay, events), 2 for longer ones (maxQueue, lastEvntId,
// coalese, throtle). Names of fewer than 3 letters (_, t, v, cb) are never
// taken for a misspelling.
//
// A QueryRules value is read-only once in use; safe for concurrent use.
type QueryRules struct {
	// Strict refuses every query parameter that is not one the
	// endpoint reads or in Allow, not only the look-alikes.
	Strict bool
	// Allow lists the application's own parameter names (exact, case
	// sensitive): never refused, in either mode, even when one looks like
	// a known name (an application that reads ?event= itself lists it
	// here).
	Allow []string
}

// checkQuery returns the 400 answer for the first offending parameter of q
// (in sorted order, so the answer is stable), or nil.
func (qr QueryRules) checkQuery(q url.Values) error {
	if len(q) == 0 {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if slices.Contains(knownParams[:], k) || slices.Contains(qr.Allow, k) {
			continue
		}
		if like := resembles(k); like != "" {
			return &StatusError{Status: http.StatusBadRequest, Code: CodeUnknownParameter,
				Message: fmt.Sprintf("unknown query parameter %s (did you mean %s? names are case-sensitive)", quote(k), like)}
		}
		if qr.Strict {
			return &StatusError{Status: http.StatusBadRequest, Code: CodeUnknownParameter,
				Message: fmt.Sprintf("unknown query parameter %s (want %s)", quote(k), strings.Join(knownParams[:], ", "))}
		}
	}
	return nil
}

// resembles returns the known parameter k is most likely a misspelling of,
// or "" (see [QueryRules] for the rule).
func resembles(k string) string {
	nk := foldName(k)
	if len(nk) < 3 {
		return ""
	}
	best, bestDist := "", 0
	for _, name := range knownParams {
		nn := foldName(name)
		limit := 1
		if len(nn) > 6 {
			limit = 2
		}
		d := textutil.Distance(nk, nn, true)
		if d > limit {
			continue
		}
		// Among equals (lastEventId and last_event_id both fold to
		// lasteventid) the one written like k wins: with separators
		// when k has any, else without.
		if best == "" || d < bestDist || d == bestDist && hasSep(k) == hasSep(name) && hasSep(k) != hasSep(best) {
			best, bestDist = name, d
		}
	}
	return best
}

func hasSep(s string) bool { return strings.ContainsAny(s, "-_. ") }

// foldName lower-cases s and drops the separators '-', '_', '.' and ' '.
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' || c == '_' || c == '.' || c == ' ':
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
