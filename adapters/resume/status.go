package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Error codes of the JSON body {"code":…,"message":…} that the SSE and
// WebSocket handlers answer before a stream starts. docs/protocol.md lists
// them with their status codes.
const (
	CodeInvalidLastEventID = "invalid_last_event_id"     // 400: Last-Event-ID / last_event_id / lastEventId malformed
	CodeInvalidMaxQueued   = "invalid_max_queued"        // 400: maxQueued not 16–2048
	CodeInvalidScope       = "invalid_scope"             // 400: scope not session|descendants|subtree|all
	CodeInvalidReplay      = "invalid_replay"            // 400: replay not 0 or 1
	CodeInvalidEpoch       = "invalid_epoch"             // 400: X-Event-Epoch malformed
	CodeInvalidEvents      = "invalid_events"            // 400: events not typed or message
	CodeInvalidSessionID   = "invalid_session_id"        // 400: empty, over-long, non-UTF-8 or control characters
	CodeInvalidRequest     = "invalid_request"           // 400: the bus refused the subscribe options
	CodeInvalidQuery       = "invalid_query"             // 400: the query does not parse (?scope=%zz, a ';') or repeats a parameter
	CodeForbidden          = "forbidden"                 // 403: the Authorize hook refused
	CodeSessionNotFound    = "session_not_found"         // 404: no such session
	CodeMethodNotAllowed   = "method_not_allowed"        // 405: not GET
	CodeSessionClosed      = "session_closed"            // 410: the session was closed
	CodeSubscriberLimit    = "subscriber_limit_exceeded" // 429: the session is at its subscriber cap; Retry-After: 5
	CodeInternal           = "internal_error"            // 500: anything else
	// CodeUnavailable is the code of a 503 answer: a closed WebSocket
	// handler, a bus that has lost its backend, a proxy. The SSE handler
	// never sends it (a closing one answers 200 with a retry: line and an
	// empty stream, so browsers reconnect); [Stream] retries it.
	CodeUnavailable = "unavailable"
)

// StatusError is an HTTP error answer of the subscribe endpoint: what the
// SSE and WebSocket handlers write as {"code":…,"message":…} with Status
// ([StatusError.Answer]), and what [Stream.Next] returns when the server
// answers a connect with a 4xx (the stream then stops). An Authorize hook
// may return one to choose the status and code itself (401 for a missing
// token, say).
//
// errors.Is matches it against the eventbus sentinels its code stands for:
// session_closed ~ [eventbus.ErrSessionClosed], session_not_found ~
// [eventbus.ErrSessionNotFound], subscriber_limit_exceeded ~
// [eventbus.ErrSubscriberLimit].
type StatusError struct {
	Status  int    // HTTP status code, e.g. 400
	Code    string // machine-readable code, e.g. "invalid_last_event_id"
	Message string // human-readable text naming the bad value
	// RetryAfter is the Retry-After delay: sent by the handler when > 0
	// (rounded up to whole seconds), read back by the client.
	RetryAfter time.Duration
	// Epoch is the answer's X-Event-Epoch, read back by [ReadStatusError]
	// (a 404 from another epoch is a restarted server); [StatusError.Answer]
	// does not write it: the handlers set that header on every answer.
	Epoch string
}

// Error reads "resume: <status> <code>: <message>".
func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("resume: %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("resume: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is reports whether the code stands for target (see [StatusError]).
func (e *StatusError) Is(target error) bool {
	switch e.Code {
	case CodeSessionClosed:
		return target == eventbus.ErrSessionClosed
	case CodeSessionNotFound:
		return target == eventbus.ErrSessionNotFound
	case CodeSubscriberLimit:
		return target == eventbus.ErrSubscriberLimit
	}
	return false
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Answer writes e to w as the handlers do: status e.Status, JSON body
// {"code":…,"message":…}, Cache-Control: no-store, nosniff, Retry-After
// (whole seconds, rounded up) when RetryAfter is set, Allow: GET for a 405.
func (e *StatusError) Answer(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.Status == http.StatusMethodNotAllowed {
		h.Set("Allow", http.MethodGet)
	}
	b, _ := json.Marshal(errorBody{Code: e.Code, Message: e.Message})
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}

// ReadStatusError builds the error of a refused request from its answer,
// a [*StatusError]: the JSON body's code and message (read up to 64 KiB;
// another body is the message, cut to 512 bytes, with the status text as
// code), the Retry-After header (seconds or an HTTP date) and the
// [HeaderEpoch]. It does not close the body; never nil.
func ReadStatusError(resp *http.Response) error {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	e := &StatusError{Status: resp.StatusCode, Epoch: resp.Header.Get(HeaderEpoch)}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Code != "" {
		e.Code, e.Message = eb.Code, eb.Message
	} else {
		e.Code = http.StatusText(resp.StatusCode)
		e.Message = string(body)
		if len(e.Message) > 512 {
			e.Message = e.Message[:512]
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.ParseUint(ra, 10, 32); err == nil {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}

// StatusFor maps an error of the bus, for session, to the answer the
// handlers give, a [*StatusError]: err's own when err is or wraps one;
// 429 subscriber_limit_exceeded (Retry-After 5), 404 session_not_found,
// 410 session_closed, 503 unavailable (Retry-After 5), 400
// invalid_request, else 500 internal_error. The message is the error's
// text without Go package prefixes. Nil for a nil err.
func StatusFor(err error, session string) error {
	if err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se
	}
	switch {
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return &StatusError{Status: http.StatusTooManyRequests, Code: CodeSubscriberLimit, Message: textutil.PublicMessage(err),
			RetryAfter: 5 * time.Second}
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return &StatusError{Status: http.StatusNotFound, Code: CodeSessionNotFound,
			Message: fmt.Sprintf("session %q not found", session)}
	case errors.Is(err, eventbus.ErrSessionClosed):
		return &StatusError{Status: http.StatusGone, Code: CodeSessionClosed,
			Message: fmt.Sprintf("session %q closed", session)}
	case errors.Is(err, eventbus.ErrClosed):
		return &StatusError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: textutil.PublicMessage(err),
			RetryAfter: 5 * time.Second}
	case errors.Is(err, eventbus.ErrInvalid):
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: textutil.PublicMessage(err)}
	}
	return &StatusError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: textutil.PublicMessage(err)}
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
