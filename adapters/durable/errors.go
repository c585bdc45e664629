package durable

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/internal/textutil"
)

// The handler's error answers are resume's: a *resume.StatusError, written
// by its Answer ({"code","message"}, Cache-Control: no-store), with the
// codes of resume's vocabulary for the causes every route shares (an
// unknown or closed session, a refused value, the subscriber cap, a closed
// bus, producer refusals: resume.StatusFor maps the bus's errors) and codes
// of its own for what only Durable Streams has (invalid_offset,
// stream_exists, content_type_mismatch, …; docs/durable-streams.md lists
// them).

// errorf is the error answer of status and code with a formatted message;
// a value the client sent is quoted with quote.
func errorf(status int, code, format string, args ...any) error {
	return &resume.StatusError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// withHeader returns the answer err is (a *resume.StatusError; any other
// error unchanged) with the headers kv (name, value, …) added.
func withHeader(err error, kv ...string) error {
	var se *resume.StatusError
	if !errors.As(err, &se) {
		return err
	}
	c := *se
	c.Header = se.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Header.Set(kv[i], kv[i+1])
	}
	return &c
}

// quote quotes a value a client sent for an answer, cut to 64 bytes, as
// every route does.
func quote(s string) string { return textutil.Quote(s, 64) }

// statusOf is the answer to err for stream name on a request of method:
// resume.StatusFor's, with the status Durable Streams gives an append to a
// closed stream (409 with Stream-Closed: true, PROTOCOL.md §5.2, where the
// other routes say 410). Any other request on a closed session keeps the
// 410 every route gives. An error the mapping does not know (500) is
// logged.
func (h *Handler) statusOf(err error, name, method string) resume.StatusError {
	var se *resume.StatusError
	errors.As(resume.StatusFor(err, name), &se)
	out := *se
	switch out.Code {
	case resume.CodeSessionClosed:
		if out.Status == http.StatusGone && method == http.MethodPost {
			out.Status = http.StatusConflict
			out.Header = out.Header.Clone()
			if out.Header == nil {
				out.Header = http.Header{}
			}
			out.Header.Set(HeaderClosed, "true")
		}
	case resume.CodeInternal:
		h.log.Error("durable: bus error", slog.Any("err", err))
	}
	return out
}

// fail writes err as the error answer to r, on stream name.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, name string, err error) {
	se := h.statusOf(err, name, r.Method)
	h.deadline(w) // a request with a body may be refused before it is read
	h.cnt.rejected.Add(1)
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "durable: refused", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Int("status", se.Status), slog.String("message", se.Message))
	se.Answer(w)
}
