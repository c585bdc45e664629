package turns

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/internal/textutil"
)

// readBody reads a cancel's body: none at all is {} (curl -X POST); one
// with a Content-Encoding other than identity is 415
// unsupported_content_encoding; a body must be Content-Type:
// application/json (415 unsupported_media_type: a page's form cannot post
// one cross-site without a preflight), at most MaxBodyBytes (413
// body_too_large) and arrive within the body timeout (408
// request_timeout, the connection closed: what is left of it is not
// read).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := serve.CheckJSONMedia(r); err != nil {
		return nil, err
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge(fmt.Sprintf("Content-Length %d is over %d bytes", r.ContentLength, MaxBodyBytes))
	}
	rc := http.NewResponseController(w)
	if h.bodyT > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(h.bodyT)) // ErrNotSupported: nothing to bound
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		if h.bodyT > 0 {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return b, nil
	case errors.As(err, &mbe):
		return nil, tooLarge(fmt.Sprintf("body over %d bytes", MaxBodyBytes))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &resume.StatusError{Status: http.StatusRequestTimeout, Code: resume.CodeRequestTimeout,
			Message: fmt.Sprintf("body not received within %v (%d bytes arrived)", h.bodyT, len(b)),
			Header:  http.Header{"Connection": {"close"}}}
	}
	return nil, &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidJSON,
		Message: fmt.Sprintf("reading the body failed after %d bytes: %s", len(b), textutil.PublicMessage(err)),
		Header:  http.Header{"Connection": {"close"}}}
}

func tooLarge(msg string) error {
	return &resume.StatusError{Status: http.StatusRequestEntityTooLarge, Code: resume.CodeBodyTooLarge, Message: msg,
		Header: http.Header{"Connection": {"close"}}}
}
