package sse

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/replaybus/replaybus/eventbus"
)

// Error codes of the JSON body {"code":…,"message":…} that [Handler]
// answers before a stream starts. docs/protocol.md lists them with their
// status codes.
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
	// CodeUnavailable is the code of a 503 answer. The handler itself
	// never sends it (a closing handler answers 200 with a retry: line and
	// an empty stream, so browsers reconnect); [Stream] retries it.
	CodeUnavailable = "unavailable"
)

// StatusError is an HTTP error answer of the SSE endpoint: what [Handler]
// writes as {"code":…,"message":…} with Status, and what [Stream.Next]
// returns when the server answers a reconnect with a 4xx (the client then
// stops). An Authorize hook may return one to choose the status and code
// itself (401 for a missing token, say).
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
}

// Error reads "sse: <status> <code>: <message>".
func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("sse: %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("sse: %d %s: %s", e.Status, e.Code, e.Message)
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

// write answers w with e as JSON.
func (e *StatusError) write(w http.ResponseWriter) {
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

// readStatusError builds the error for a non-200 response from its body
// (read up to 64 KiB) and headers.
func readStatusError(resp *http.Response, body []byte) *StatusError {
	e := &StatusError{Status: resp.StatusCode}
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

// statusFor maps a Subscribe error for session to the answer the handler
// writes.
func statusFor(err error, session string) *StatusError {
	var limit *eventbus.SubscriberLimitError
	switch {
	case errors.As(err, &limit):
		return &StatusError{Status: http.StatusTooManyRequests, Code: CodeSubscriberLimit,
			Message:    fmt.Sprintf("session %q already has %d subscribers (the limit)", limit.Session, limit.Limit),
			RetryAfter: 5 * time.Second}
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return &StatusError{Status: http.StatusTooManyRequests, Code: CodeSubscriberLimit, Message: publicMessage(err),
			RetryAfter: 5 * time.Second}
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return &StatusError{Status: http.StatusNotFound, Code: CodeSessionNotFound,
			Message: fmt.Sprintf("session %q not found", session)}
	case errors.Is(err, eventbus.ErrSessionClosed):
		return &StatusError{Status: http.StatusGone, Code: CodeSessionClosed,
			Message: fmt.Sprintf("session %q closed", session)}
	case errors.Is(err, eventbus.ErrClosed):
		return &StatusError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: publicMessage(err),
			RetryAfter: 5 * time.Second}
	case errors.Is(err, eventbus.ErrInvalid):
		return &StatusError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: publicMessage(err)}
	}
	return &StatusError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: publicMessage(err)}
}

// publicMessage is err's text for an HTTP answer: without the Go package
// prefixes ("eventbus: ", "sse: ", …) that mean nothing to a client.
func publicMessage(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, ": ")
		if i < 0 {
			return msg
		}
		switch msg[:i] {
		case "eventbus", "sse", "scope", "replay", "nats", "config", "json", "url", "strconv":
			msg = msg[i+2:]
		default:
			return msg
		}
	}
}
