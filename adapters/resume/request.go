package resume

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
	"github.com/replaybus/replaybus/scope"
)

// Request defaults and bounds shared by both transports.
const (
	// HeaderEpoch carries the bus epoch: the handlers send it on every
	// answer, and a client sends it back so that a cursor from another bus
	// incarnation is detected (an epoch_reset frame, not an error).
	HeaderEpoch = "X-Event-Epoch"
	// MinMaxQueued and MaxMaxQueued bound the ?maxQueued= query parameter,
	// qwen-code's range.
	MinMaxQueued, MaxMaxQueued = 16, 2048
)

// ParseRequest validates what a subscribe request carries besides its path
// and turns it into subscribe options, exactly as the SSE and WebSocket
// handlers do before they answer: the session id (given by the caller,
// from the path), the query parameters scope, maxQueued (16–2048), replay
// (0 or 1; a cursor wins over 0: a resume always replays), coalesce (acp,
// agentpool, off), throttle (a duration 0–5s, with coalesce), types
// (comma-separated event types the client receives) and snapshot (0 or 1:
// the application's state first, where the bus has a provider; a request
// with a Last-Event-ID header is a reconnect and asks for none), lastEventId
// / last_event_id, and the Last-Event-ID and [HeaderEpoch] headers (the
// header cursor wins over the query, last_event_id over lastEventId; an
// epoch-qualified cursor names its epoch; a well-formed epoch the bus
// cannot have issued is mapped to a stand-in that differs from ownEpoch, the
// bus's, so that it is an epoch_reset). A query that does not parse or names
// one of these parameters twice, and a repeated cursor or epoch header, are
// 400 too. Query parameters the endpoint does not read follow rules (see
// [QueryRules]; the zero value refuses only look-alikes of known names,
// such as ?lastEventID=5, so a resume is never silently dropped). The
// options come with RequireSession set and Name = r.RemoteAddr.
//
// A bad value is a 400 [*StatusError] (as an error) whose code says which parameter
// (invalid_session_id, invalid_query, invalid_scope, invalid_max_queued,
// invalid_replay, invalid_coalesce, invalid_throttle, invalid_types, invalid_snapshot, invalid_epoch,
// invalid_last_event_id, unknown_query_parameter) and whose message quotes
// the value (cut to 64 bytes). It reads only r's URL and headers, never its
// body; safe for concurrent use.
func ParseRequest(r *http.Request, sessionID, ownEpoch string, rules QueryRules) (eventbus.SubscribeOptions, error) {
	var o eventbus.SubscribeOptions
	bad := func(code, format string, args ...any) (eventbus.SubscribeOptions, error) {
		return eventbus.SubscribeOptions{}, &StatusError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	if sessionID == "" {
		return bad(CodeInvalidSessionID, "empty session id")
	}
	if err := frame.CheckName("session id", sessionID); err != nil {
		// The text Subscribe's ErrInvalid gives, without "eventbus: ".
		return bad(CodeInvalidSessionID, "invalid argument: %v", err)
	}
	// A query that does not parse (?scope=%zz, ?a=1;scope=x) or names one
	// of our parameters twice is refused: url.Query would silently drop the
	// bad pair and fall back to a default the client did not ask for.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return bad(CodeInvalidQuery, "invalid query %s: %s", quote(r.URL.RawQuery), textutil.PublicMessage(err))
	}
	for _, name := range knownParams {
		if len(q[name]) > 1 {
			return bad(CodeInvalidQuery, "query parameter %s given %d times (want at most once)", name, len(q[name]))
		}
	}
	if err := rules.checkQuery(q); err != nil {
		return eventbus.SubscribeOptions{}, err
	}
	for _, hn := range [...]string{"Last-Event-ID", HeaderEpoch} {
		if n := len(r.Header.Values(hn)); n > 1 {
			code := CodeInvalidLastEventID
			if hn == HeaderEpoch {
				code = CodeInvalidEpoch
			}
			return bad(code, "header %s sent %d times (want at most once)", hn, n)
		}
	}

	if s := q.Get("scope"); s != "" {
		k, err := scope.Parse(s)
		if err != nil {
			return bad(CodeInvalidScope, "invalid scope %s (want session, descendants, subtree or all)", quote(s))
		}
		o.Scope = k
	}
	if s := q.Get("maxQueued"); s != "" {
		n, reason := parseSeq(s, 0)
		if reason == "" && (n < MinMaxQueued || n > MaxMaxQueued) {
			reason = "out of range"
		}
		if reason != "" {
			return bad(CodeInvalidMaxQueued, "invalid maxQueued %s: %s (want an integer %d–%d)",
				quote(s), reason, MinMaxQueued, MaxMaxQueued)
		}
		o.MaxQueued = int(n)
	}
	switch s := q.Get("replay"); s {
	case "", "1":
	case "0":
		o.NoReplay = true
	default:
		return bad(CodeInvalidReplay, "invalid replay %s (want 0 or 1)", quote(s))
	}
	if err := parseCoalescing(q, &o); err != nil {
		return eventbus.SubscribeOptions{}, err
	}
	if err := parseTypes(q, &o); err != nil {
		return eventbus.SubscribeOptions{}, err
	}
	if err := parseSnapshot(q, &o); err != nil {
		return eventbus.SubscribeOptions{}, err
	}

	epoch, err := ParseEpoch(r.Header.Get(HeaderEpoch))
	if err != nil {
		return bad(CodeInvalidEpoch, "%s", err.(*EpochError).message())
	}
	// Every cursor source is validated; the header (what a reconnecting
	// EventSource sends) wins over the query (which the URL keeps
	// repeating), and last_event_id over lastEventId.
	var cur *eventbus.Position
	for _, v := range [...]string{q.Get("lastEventId"), q.Get("last_event_id"), r.Header.Get("Last-Event-ID")} {
		c, err := ParseCursor(v)
		if err != nil {
			return bad(CodeInvalidLastEventID, "%s", err.(*CursorError).message())
		}
		if c != nil {
			cur = c
		}
	}
	if cur != nil {
		if cur.Epoch == "" {
			cur.Epoch = epoch // a plain id: the header's epoch, if any
		}
		cur.Epoch = busEpoch(cur.Epoch, ownEpoch)
		// A resume always replays: the cursor wins over replay=0, or a
		// client on a live-only URL would lose, without a frame saying
		// so, every event published while it was cut off.
		o.NoReplay = false
	}
	if r.Header.Get("Last-Event-ID") != "" {
		// A reconnect (what an EventSource sends on its own, the URL
		// unchanged) resumes after what it has, the snapshot frame's id
		// included, instead of asking for another snapshot; a lost
		// position still gets one.
		o.Snapshot = false
	}
	o.Cursor = cur
	o.RequireSession = true
	o.Name = r.RemoteAddr
	return o, nil
}

// ParseEvents validates the events= query parameter: "" or "typed" (false)
// and "message" (true: every frame as a plain "message" event). Anything
// else is a 400 invalid_events [*StatusError] quoting the value.
func ParseEvents(s string) (message bool, err error) {
	switch s {
	case "", "typed":
		return false, nil
	case "message":
		return true, nil
	}
	return false, &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidEvents,
		Message: fmt.Sprintf("invalid events %s (want typed or message)", quote(s))}
}

// BusEpoch returns what to hand the bus as SubscribeOptions.Epoch for a
// well-formed epoch a client sent (as [ParseEpoch] or [ParseCursor] accept
// it): the epoch itself when the bus could have issued it, else a stand-in
// that the bus accepts and that differs from own (the bus's epoch), so that
// a foreign epoch — a UUID with hyphens, say — is an epoch_reset. Exported
// for transports that receive the epoch elsewhere (the WebSocket resume
// message).
func BusEpoch(epoch, own string) string { return busEpoch(epoch, own) }
