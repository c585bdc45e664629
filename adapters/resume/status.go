package resume

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// StatusError is an HTTP error answer: what the SSE, WebSocket and
// Durable Streams handlers write as {"code":…,"message":…} with Status
// ([StatusError.Answer]; the codes are the Code… constants), and what
// [Stream.Next] returns when the server answers a connect with a 4xx (the
// stream then stops). An Authorize hook may return one to choose the
// status and code itself (401 for a missing token, say).
//
// errors.Is matches it against the eventbus sentinels its code stands for:
// session_closed ~ [eventbus.ErrSessionClosed], session_not_found ~
// [eventbus.ErrSessionNotFound], subscriber_limit_exceeded ~
// [eventbus.ErrSubscriberLimit], turn_active ~ [eventbus.ErrTurnActive],
// turn_ended ~ [eventbus.ErrTurnEnded].
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
	// Header holds further headers of the answer (a producer refusal's
	// Producer-Epoch, a closed Durable Stream's Stream-Closed); nil for
	// none. Answer writes them last, so they win over its own.
	Header http.Header
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
	case CodeTurnActive:
		return target == eventbus.ErrTurnActive
	case CodeTurnEnded:
		return target == eventbus.ErrTurnEnded
	}
	return false
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Answer writes e to w as the handlers do: status e.Status, JSON body
// {"code":…,"message":…}, Cache-Control: no-store, nosniff, Retry-After
// (whole seconds, rounded up) when RetryAfter is set, Allow: GET for a 405,
// then e.Header.
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
	for k, v := range e.Header {
		h[k] = v
	}
	b, _ := textutil.MarshalJSON(errorBody{Code: e.Code, Message: e.Message})
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
