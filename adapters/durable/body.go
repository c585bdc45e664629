package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/replaybus/replaybus/internal/textutil"
)

// body reads r's body, up to MaxBodyBytes (413 beyond), as readBody.
func (h *Handler) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return h.readBody(w, r, h.opts.MaxBodyBytes)
}

// readBody reads r's body, up to limit bytes (413 body_too_large beyond).
// A read that meets the connection's read deadline (a server's bound on a
// body that never finishes) is 408 request_timeout naming how much
// arrived, as the example server's JSON routes answer it, with
// Connection: close. The answer's write deadline starts again once the
// body is in: a slow upload must not spend the WriteTimeout its answer
// needs (an append, or a subscription, would be stored and its answer
// cut, and the client retry it). Every body the handler reads (appends,
// creates, the __ds subscription APIs) is read here.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "body of %d bytes is over the %d-byte limit", r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	h.deadline(w)
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "body over the %d-byte limit", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, withHeader(errorf(http.StatusRequestTimeout, "request_timeout", "the body did not arrive in time (%d bytes arrived%s)", len(b), ofLength(r)),
			"Connection", "close")
	case err != nil:
		return nil, errorf(http.StatusBadRequest, "invalid_body", "reading the body: %v", err)
	}
	return b, nil
}

// ofLength is ", of N" for a request that announced its body's length.
func ofLength(r *http.Request) string {
	if r.ContentLength > 0 {
		return " of " + strconv.FormatInt(r.ContentLength, 10)
	}
	return ""
}

// maxAppendMessages bounds the messages of one JSON append (a top-level
// array flattened): each is a bus event published under the stream's
// lock, and 8 MiB of one-byte messages (4 million) took 45 s, past the
// answer's write deadline.
const maxAppendMessages = 10000

// split turns an append's body into items: for a JSON stream each element
// of a top-level array (one level flattened, PROTOCOL.md §9.1.2; an empty
// array is refused on POST, allowed on PUT; more than maxAppendMessages is
// 413) or the single value; else the
// bytes as one item. JSON that is not UTF-8 is refused (400 invalid_json
// naming the first bad byte): encoding/json's json.Valid lets invalid
// bytes inside strings through, and such an event would reach the SSE and
// WebSocket routes as text that is not UTF-8 (a browser fails a WebSocket
// connection on it, RFC 6455 §8.1, and the replay sends it again on every
// reconnect).
func (h *Handler) split(s *stream, body []byte, create bool) ([][]byte, error) {
	if !s.json {
		return [][]byte{body}, nil
	}
	if !json.Valid(body) {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not valid JSON")
	}
	if !utf8.Valid(body) {
		i := textutil.InvalidUTF8At(body)
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not UTF-8: invalid UTF-8 at byte %d (0x%02x)", i, body[i])
	}
	trim := strings.TrimLeft(string(body), " \t\r\n")
	if !strings.HasPrefix(trim, "[") {
		return [][]byte{body}, nil
	}
	// Decoded one message at a time, so that an array over the cap is
	// refused having held at most the cap (8 MiB of one-byte messages
	// is 4 million of them).
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '['
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not valid JSON: %v", err)
	}
	var out [][]byte
	for dec.More() {
		if len(out) == maxAppendMessages {
			return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large",
				"a JSON array of more than %d messages: one append holds at most %d; append it in parts", maxAppendMessages, maxAppendMessages)
		}
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not valid JSON: %v", err)
		}
		out = append(out, m)
	}
	if len(out) == 0 && !create {
		return nil, errorf(http.StatusBadRequest, "empty_array", "an empty JSON array appends nothing")
	}
	return out, nil
}

// mediaType is ct's media type, lower case, without parameters.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	}
	return strings.TrimSpace(mt)
}
