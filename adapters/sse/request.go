package sse

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// ParseRequest validates what a subscribe request carries besides its path
// and turns it into subscribe options, exactly as [Handler] does before it
// answers: the session id (given by the caller, from the path), the query
// parameters scope, maxQueued (16–2048), replay (0 or 1; a cursor wins over 0: a resume always replays), coalesce (acp,
// agentpool, off) and throttle (a duration 0–5s, with coalesce), lastEventId /
// last_event_id, and the Last-Event-ID and X-Event-Epoch headers (the
// header cursor wins over the query, last_event_id over lastEventId; an
// epoch-qualified cursor names its epoch; a well-formed epoch the bus
// cannot have issued is mapped to a stand-in that differs from ownEpoch, the
// bus's, so that it is an epoch_reset). A query that does not parse or names
// one of these parameters twice, and a repeated cursor or epoch header, are
// 400 too. The options come with RequireSession set and Name = r.RemoteAddr.
//
// A bad value is a 400 [*StatusError] whose code says which parameter
// (invalid_session_id, invalid_query, invalid_scope, invalid_max_queued,
// invalid_replay, invalid_coalesce, invalid_throttle, invalid_epoch,
// invalid_last_event_id, unknown_query_parameter) and whose message quotes
// the value (cut to 64 bytes). A query parameter the endpoint does not read
// is ignored unless it looks like a misspelling of one it does
// (?lastEventID=5, ?last-event-id=5, ?maxQueue=64): that is a 400
// unknown_query_parameter naming the parameter and the name it resembles,
// so a resume is never silently dropped. ParseRequest applies the default
// [QueryRules]; [ParseRequestWith] takes others (strict mode). Other transports that serve the same endpoint shape
// (the WebSocket adapter) call it so that both validate alike. It reads only
// r's URL and headers, never its body; safe for concurrent use.
func ParseRequest(r *http.Request, sessionID, ownEpoch string) (eventbus.SubscribeOptions, *StatusError) {
	return ParseRequestWith(r, sessionID, ownEpoch, QueryRules{})
}

// ParseRequestWith is [ParseRequest] with rules for the query parameters
// the endpoint does not read (see [QueryRules]); the handlers call it with
// their HandlerOptions.Query.
func ParseRequestWith(r *http.Request, sessionID, ownEpoch string, rules QueryRules) (eventbus.SubscribeOptions, *StatusError) {
	var o eventbus.SubscribeOptions
	bad := func(code, format string, args ...any) (eventbus.SubscribeOptions, *StatusError) {
		return eventbus.SubscribeOptions{}, &StatusError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	if sessionID == "" {
		return bad(CodeInvalidSessionID, "empty session id")
	}
	if err := eventbus.CheckSessionID(sessionID); err != nil {
		return bad(CodeInvalidSessionID, "%s", publicMessage(err))
	}
	// A query that does not parse (?scope=%zz, ?a=1;scope=x) or names one
	// of our parameters twice is refused: url.Query would silently drop the
	// bad pair and fall back to a default the client did not ask for.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return bad(CodeInvalidQuery, "invalid query %s: %s", quoteCut(r.URL.RawQuery), publicMessage(err))
	}
	for _, name := range knownParams {
		if len(q[name]) > 1 {
			return bad(CodeInvalidQuery, "query parameter %s given %d times (want at most once)", name, len(q[name]))
		}
	}
	if serr := rules.checkQuery(q); serr != nil {
		return eventbus.SubscribeOptions{}, serr
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
			return bad(CodeInvalidScope, "invalid scope %s (want session, descendants, subtree or all)", quoteCut(s))
		}
		o.Scope = k
	}
	if s := q.Get("maxQueued"); s != "" {
		n, reason := parseSeq(s)
		if reason == "" && (n < MinMaxQueued || n > MaxMaxQueued) {
			reason = "out of range"
		}
		if reason != "" {
			return bad(CodeInvalidMaxQueued, "invalid maxQueued %s: %s (want an integer %d–%d)",
				quoteCut(s), reason, MinMaxQueued, MaxMaxQueued)
		}
		o.MaxQueued = int(n)
	}
	switch s := q.Get("replay"); s {
	case "", "1":
	case "0":
		o.NoReplay = true
	default:
		return bad(CodeInvalidReplay, "invalid replay %s (want 0 or 1)", quoteCut(s))
	}
	if serr := parseCoalescing(q, &o); serr != nil {
		return eventbus.SubscribeOptions{}, serr
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
	o.Cursor = cur
	o.RequireSession = true
	o.Name = r.RemoteAddr
	return o, nil
}

// ParseEvents validates the events= query parameter: "" or "typed" (false)
// and "message" (true: every frame as a plain "message" event). Anything
// else is a 400 invalid_events [*StatusError] quoting the value.
func ParseEvents(s string) (message bool, serr *StatusError) {
	switch s {
	case "", "typed":
		return false, nil
	case "message":
		return true, nil
	}
	return false, &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidEvents,
		Message: fmt.Sprintf("invalid events %s (want typed or message)", quoteCut(s))}
}

// StatusFor maps an error of [eventbus.Bus.Subscribe] for session to the answer the
// handler gives: 429 subscriber_limit_exceeded (Retry-After 5), 404
// session_not_found, 410 session_closed, 503 unavailable (Retry-After 5),
// 400 invalid_request, else 500 internal_error; the message is the error's
// text. Exported for other transports of the same endpoint.
func StatusFor(err error, session string) *StatusError { return statusFor(err, session) }

// WriteError answers w with e as the handler does: status e.Status, JSON
// body {"code":…,"message":…}, no-store, nosniff, Retry-After when set,
// Allow: GET for a 405. Exported for other transports of the same endpoint.
func WriteError(w http.ResponseWriter, e *StatusError) { e.write(w) }

// BusEpoch returns what to hand the bus as SubscribeOptions.Epoch for a
// well-formed epoch a client sent (as [ParseEpoch] or [ParseCursor] accept
// it): the epoch itself when the bus could have issued it, else a stand-in
// that the bus accepts and that differs from own (the bus's epoch), so that
// a foreign epoch — a UUID with hyphens, say — is an epoch_reset. Exported
// for transports that receive the epoch elsewhere (the WebSocket resume
// message).
func BusEpoch(epoch, own string) string { return busEpoch(epoch, own) }
