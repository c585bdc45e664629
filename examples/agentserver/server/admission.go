package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/textutil"
)

// DefaultBodyTimeout bounds how long a POST may take to deliver its body
// (Options.BodyTimeout).
const DefaultBodyTimeout = 10 * time.Second

// DefaultWriteTimeout bounds how long writing the answer of a route other
// than the streams may take (Options.WriteTimeout).
const DefaultWriteTimeout = 10 * time.Second

// checkID is the one validation of a session id, for every route that takes
// one (the {id} of a path, "id" and "parent" of POST /sessions): what the bus
// accepts (frame.CheckName: 1–256 bytes of UTF-8, no control
// characters) and what fits one URL path segment ("/", "." and ".." do not:
// a session created as "a/c" could never be addressed by its URL). It
// returns "" or what is wrong.
func checkID(what, id string) string {
	if err := frame.CheckName(what, id); err != nil {
		return "invalid argument: " + err.Error() // as the bus says it
	}
	switch {
	case strings.Contains(id, "/"):
		return fmt.Sprintf("%s %s contains '/' (it must fit one URL path segment)", what, quote(id))
	case id == "." || id == "..":
		return fmt.Sprintf("%s %s is a dot segment (it must fit one URL path segment)", what, quote(id))
	}
	return ""
}

// checkOrigin validates the "origin" of a published event: the same rules as
// an id, so that a newline or 10 KiB of text never reaches a log line or
// another client's page.
func checkOrigin(origin string) string {
	if origin == "" {
		return ""
	}
	if err := frame.CheckName("origin", origin); err != nil {
		return "invalid argument: " + err.Error() // as the bus says it
	}
	return ""
}

// validPathID answers 400 invalid_session_id when the {id} of the path is
// not a valid session id and reports whether to go on.
func validPathID(w http.ResponseWriter, r *http.Request) bool {
	if msg := checkID("session id", r.PathValue("id")); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_session_id", msg)
		return false
	}
	return true
}

// checkQuery answers 400 invalid_argument, naming the parameter, when r's
// query does not parse or names a parameter other than allowed (the POST
// routes take none, DELETE only cascade), and reports whether to go on.
// Unlike the stream routes, which ignore parameters they do not read
// (embedders add their own), these routes are the example's own API:
// ?cascde=1 or ?Cascade=1 closed only the session, silently.
func checkQuery(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	want := "this route takes no query parameters"
	if len(allowed) > 0 {
		want = "want only " + strings.Join(allowed, ", ")
	}
	// The stream routes' codes for the same causes (resume.ParseRequest):
	// a query that does not parse or repeats a parameter is invalid_query,
	// a parameter the route does not read unknown_query_parameter.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, resume.CodeInvalidQuery, fmt.Sprintf("invalid query %s (%s)", quote(r.URL.RawQuery), want))
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, k) {
			writeError(w, http.StatusBadRequest, resume.CodeUnknownParameter,
				fmt.Sprintf("unknown query parameter %s on %s %s (%s)", quote(k), r.Method, r.URL.Path, want))
			return false
		}
		if len(q[k]) > 1 {
			writeError(w, http.StatusBadRequest, resume.CodeInvalidQuery,
				fmt.Sprintf("query parameter %s repeated on %s %s", quote(k), r.Method, r.URL.Path))
			return false
		}
	}
	return true
}

// cleanPath reports whether p is already clean: no empty, "." or ".."
// segment. A ServeMux would redirect such a path (/session//events →
// 307 /session/events); the server answers 404 instead, so that a client
// with a bad id is told so and not sent somewhere else.
func cleanPath(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// readBody reads one JSON object into v under the body's deadline and
// limits; an empty body is allowed when emptyOK. It answers the error
// itself and reports whether to go on:
//
//	415 unsupported_content_encoding  a Content-Encoding other than identity
//	                            (gzip, br, …): the answer carries
//	                            Accept-Encoding: identity (RFC 9110 §12.5.3)
//	415 unsupported_media_type  a body whose Content-Type is not application/json
//	                            (a cross-site form or text/plain POST, which a
//	                            web page may send without a CORS preflight)
//	413 body_too_large          a Content-Length or body over MaxBodyBytes (at once)
//	408 request_timeout         the body did not arrive within BodyTimeout
//	400 invalid_json            not UTF-8, null, not an object, unknown
//	                            fields, a member given twice or in another
//	                            case ("TYPE"), a lone surrogate escape in a
//	                            member, trailing data; the message says at
//	                            which byte
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	hasBody := hasBody(r)
	if enc := contentEncoding(r.Header); enc != "" {
		// Refused, not decoded: a compressed body would need a second
		// bound (on what it inflates to) for no gain on bodies of at most
		// 1 MiB, and read as identity it failed as "invalid JSON".
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_content_encoding",
			fmt.Sprintf("Content-Encoding %s is not supported (send the body uncompressed, without Content-Encoding)", quote(enc)))
		return false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" || hasBody {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			w.Header().Set("Accept", "application/json")
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				fmt.Sprintf("Content-Type %s is not supported (want application/json)", quote(ct)))
			return false
		}
	}
	if r.ContentLength > MaxBodyBytes {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("Content-Length %d is over %d bytes", r.ContentLength, MaxBodyBytes))
		return false
	}
	var body []byte
	if hasBody {
		// The read is bounded by the deadline boundBody set (BodyTimeout
		// from when the request arrived), so a body that never finishes
		// does not pin the connection and its goroutine.
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			// The deadline stays: after the answer, net/http reads what
			// is left of the body before it can close or reuse the
			// connection, and that read must not hang either.
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", mbe.Limit))
			case errors.Is(err, os.ErrDeadlineExceeded):
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusRequestTimeout, "request_timeout",
					fmt.Sprintf("body not received within %v (%d bytes arrived%s)", s.bodyTimeout, len(body), ofLength(r)))
			default:
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusBadRequest, "invalid_json",
					fmt.Sprintf("reading the body failed after %d bytes%s: %s", len(body), ofLength(r), publicMessage(err)))
			}
			return false
		}
		// The whole body is in: the connection may be kept alive, with
		// no deadline left on it for the next request.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		w.Header().Del("Connection")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if emptyOK {
			return true
		}
		writeError(w, http.StatusBadRequest, "invalid_json", "empty body (want a JSON object)")
		return false
	}
	if !utf8.Valid(body) {
		i := textutil.InvalidUTF8At(body)
		writeError(w, http.StatusBadRequest, "invalid_json", fmt.Sprintf("invalid UTF-8 at byte %d (byte 0x%02x)", i, body[i]))
		return false
	}
	if trimmed[0] != '{' {
		writeError(w, http.StatusBadRequest, "invalid_json",
			fmt.Sprintf("body is %s, want a JSON object", jsonKind(trimmed)))
		return false
	}
	if msg := checkMembers(body, v); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_json", msg)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", jsonError(err, dec, len(body)))
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json",
			fmt.Sprintf("trailing data after the JSON object at byte %d", dec.InputOffset()))
		return false
	}
	return true
}

// contentEncoding returns the request's Content-Encoding when it names any
// coding other than identity (all its values joined), else "".
func contentEncoding(h http.Header) string {
	vals := h.Values("Content-Encoding")
	for _, v := range vals {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return strings.Join(vals, ", ")
			}
		}
	}
	return ""
}

func ofLength(r *http.Request) string {
	if r.ContentLength > 0 {
		return " of " + strconv.FormatInt(r.ContentLength, 10)
	}
	return ""
}

// jsonKind names the JSON value that starts b.
func jsonKind(b []byte) string {
	switch c := b[0]; {
	case bytes.Equal(b, []byte("null")):
		return "null"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return fmt.Sprintf("not JSON (starts with %s)", quote(string(b[:min(len(b), 16)])))
}

// jsonError says what is wrong with a body and at which byte.
func jsonError(err error, dec *json.Decoder, n int) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %s", max(syn.Offset-1, 0), syn.Error())
	case errors.As(err, &typ):
		return fmt.Sprintf("invalid JSON at byte %d: field %q must be %s, not %s", typ.Offset, typ.Field, jsonTypeName(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("invalid JSON at byte %d: unexpected end of input", n)
	}
	return fmt.Sprintf("invalid JSON at byte %d: %s", dec.InputOffset(), publicMessage(err))
}

func jsonTypeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "json.RawMessage":
		return "any JSON value"
	}
	return goType
}

// quote quotes s for an error message: non-ASCII as itself (٣, not Ù),
// invalid UTF-8 as \x escapes, cut to 64 bytes at a rune boundary.
func quote(s string) string { return textutil.Quote(s, 64) }

// publicMessage is err's text for an HTTP answer: without the Go package
// prefixes ("eventbus: ", "json: ", …) that mean nothing to a client.
func publicMessage(err error) string { return textutil.PublicMessage(err) }
