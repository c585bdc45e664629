package resume

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Error codes of the JSON body {"code":…,"message":…} of every error
// answer, one code for one cause on every route (SSE, WebSocket, Durable
// Streams); docs/protocol.md lists them with their status codes,
// docs/durable-streams.md those of the Durable Streams route.
const (
	CodeInvalidLastEventID   = "invalid_last_event_id"        // 400: Last-Event-ID / last_event_id / lastEventId malformed
	CodeInvalidMaxQueued     = "invalid_max_queued"           // 400: maxQueued not 16–2048
	CodeInvalidScope         = "invalid_scope"                // 400: scope not session|descendants|subtree|all
	CodeInvalidReplay        = "invalid_replay"               // 400: replay not 0 or 1
	CodeInvalidEpoch         = "invalid_epoch"                // 400: X-Event-Epoch malformed
	CodeInvalidEvents        = "invalid_events"               // 400: events not typed or message
	CodeInvalidSessionID     = "invalid_session_id"           // 400: empty, over-long, non-UTF-8 or control characters
	CodeInvalidArgument      = "invalid_argument"             // 400: the bus refused a value (eventbus.ErrInvalid)
	CodeInvalidQuery         = "invalid_query"                // 400: the query does not parse (?scope=%zz, a ';') or repeats a parameter
	CodeForbidden            = "forbidden"                    // 403: the Authorize hook refused
	CodeForbiddenOrigin      = "forbidden_origin"             // 403: a browser page of another origin (a WebSocket handshake, a cross-site POST)
	CodeStaleProducerEpoch   = "stale_producer_epoch"         // 403: a producer's epoch below the one in force (Producer-Epoch names it)
	CodeNotFound             = "not_found"                    // 404: no such route
	CodeSessionNotFound      = "session_not_found"            // 404: no such session
	CodeMethodNotAllowed     = "method_not_allowed"           // 405: a method the route does not take (Allow lists them)
	CodeProducerSeqGap       = "producer_seq_gap"             // 409: a producer's sequence past the next (Producer-Expected-Seq names it)
	CodeTurnActive           = "turn_active"                  // 409: the session has an active turn (eventbus.ErrTurnActive; the message names it)
	CodeTurnEnded            = "turn_ended"                   // 409: a cancel of a turn that has ended (eventbus.ErrTurnEnded; the message names it)
	CodeSessionClosed        = "session_closed"               // 410 (409 for an append to a closed Durable Stream): the session was closed
	CodeRingEvicted          = frame.ReasonRingEvicted        // 410: a Durable Streams offset whose events the replay buffer evicted
	CodeEpochReset           = frame.ReasonEpochReset         // 410: a Durable Streams offset of another epoch (the bus restarted)
	CodeRequestTimeout       = "request_timeout"              // 408: a request body that did not arrive within the route's bound
	CodeBodyTooLarge         = "body_too_large"               // 413: a request body over the route's limit
	CodeUnsupportedMediaType = "unsupported_media_type"       // 415: a body that is not Content-Type: application/json
	CodeUnsupportedEncoding  = "unsupported_content_encoding" // 415: a body with a Content-Encoding other than identity
	CodeSubscriberLimit      = "subscriber_limit_exceeded"    // 429: the session is at its subscriber cap; Retry-After: 5
	CodeTooManySessions      = "too_many_sessions"            // 400: a many-sessions set over its cap (HandlerOptions.MaxSessions; the message names both)
	CodeConnectionNotFound   = "connection_not_found"         // 404: POST {events}/{conn} for no open many-sessions stream on this server
	CodeInternal             = "internal_error"               // 500: anything else
	CodeNotImplemented       = "not_implemented"              // 501: the bus cannot do it (idempotent producers on a backend without them)
	// CodeUnavailable is the code of a 503 answer: a closed WebSocket or
	// Durable Streams handler, a closed bus, a bus that has lost its
	// backend, a proxy. The SSE handler never sends it (a closing one
	// answers 200 with a retry: line and an empty stream, so browsers
	// reconnect); [Stream] retries it.
	CodeUnavailable = "unavailable"
)

// busAnswers is the one mapping of the bus's errors onto answers, for every
// handler: the first row whose error errors.Is matches decides the status,
// the code and the Retry-After. A new cause is one row.
var busAnswers = [...]struct {
	err        error
	status     int
	code       string
	retryAfter time.Duration
}{
	{eventbus.ErrSubscriberLimit, http.StatusTooManyRequests, CodeSubscriberLimit, 5 * time.Second},
	{eventbus.ErrSessionNotFound, http.StatusNotFound, CodeSessionNotFound, 0},
	{eventbus.ErrSessionClosed, http.StatusGone, CodeSessionClosed, 0},
	{eventbus.ErrClosed, http.StatusServiceUnavailable, CodeUnavailable, 5 * time.Second},
	// A node cut off from its backend heals by itself: retried soon, as
	// the example server's publish route and /healthz say for the same
	// cause (issue 27.6: it was 500 internal_error).
	{eventbus.ErrBackend, http.StatusServiceUnavailable, CodeUnavailable, time.Second},
	{producer.ErrStaleEpoch, http.StatusForbidden, CodeStaleProducerEpoch, 0},
	{producer.ErrSequenceGap, http.StatusConflict, CodeProducerSeqGap, 0},
	{eventbus.ErrTurnActive, http.StatusConflict, CodeTurnActive, 0},
	{eventbus.ErrTurnEnded, http.StatusConflict, CodeTurnEnded, 0},
	{eventbus.ErrInvalid, http.StatusBadRequest, CodeInvalidArgument, 0},
	{errors.ErrUnsupported, http.StatusNotImplemented, CodeNotImplemented, 0},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, CodeUnavailable, time.Second},
	{context.Canceled, http.StatusServiceUnavailable, CodeUnavailable, time.Second},
}

// StatusFor maps an error of the bus, for session, to the answer every
// handler gives, a [*StatusError]: err's own when err is or wraps one; a
// lost position (*eventbus.PositionLostError) 410 with its reason as code;
// else the first row of the table whose error errors.Is matches (429
// subscriber_limit_exceeded, 404 session_not_found, 410 session_closed,
// 503 unavailable (Retry-After 5 for a closed bus, 1 for a failing
// backend: eventbus.ErrBackend), 403 stale_producer_epoch, 409 producer_seq_gap, 409
// turn_active, 409 turn_ended, 400 invalid_argument, 501 not_implemented;
// docs/protocol.md), with its
// Retry-After and producer headers; else 500 internal_error. The message is
// the error's text without Go package prefixes. Nil for nil.
func StatusFor(err error, session string) error {
	if err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se
	}
	se = &StatusError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: textutil.PublicMessage(err)}
	var lost *eventbus.PositionLostError
	if errors.As(err, &lost) { // a StrictCursor read's position (Durable Streams)
		se.Status, se.Code = http.StatusGone, lost.Reason
		return se
	}
	for _, a := range busAnswers {
		if errors.Is(err, a.err) {
			se.Status, se.Code, se.RetryAfter = a.status, a.code, a.retryAfter
			break
		}
	}
	switch se.Code {
	case CodeSessionNotFound:
		se.Message = fmt.Sprintf("session %s not found", quote(session))
	case CodeSessionClosed:
		se.Message = fmt.Sprintf("session %s closed", quote(session))
	case CodeStaleProducerEpoch, CodeProducerSeqGap:
		var pe *producer.Error
		if errors.As(err, &pe) {
			se.Header = http.Header{}
			if se.Code == CodeStaleProducerEpoch {
				se.Header.Set("Producer-Epoch", strconv.FormatUint(pe.Epoch, 10))
			} else {
				se.Header.Set("Producer-Expected-Seq", strconv.FormatUint(pe.Expected, 10))
				se.Header.Set("Producer-Received-Seq", strconv.FormatUint(pe.Stamp.Seq, 10))
			}
		}
	}
	return se
}

// WriteError answers err on w as the handlers do: the [*StatusError] that
// [StatusFor] makes of it for session, written by [StatusError.Answer].
// A nil err writes nothing.
func WriteError(w http.ResponseWriter, err error, session string) {
	var se *StatusError
	if errors.As(StatusFor(err, session), &se) {
		se.Answer(w)
	}
}
