package server

import (
	"io"
	"net/http"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
)

// boundBody bounds the arrival of r's body, when it has one, to
// BodyTimeout from now, for every route: the answer (a refusal or the 408
// of readBody) never waits for a body that does not come. Until the route
// has read the whole body, the HTTP/1 answer carries Connection: close:
// net/http would otherwise read (discard) the unread body before it writes
// an answer, and a body that never arrives would hold that answer until the
// deadline. After the answer net/http still reads what is left of the body
// (up to 256 KiB) to close cleanly, within the same deadline. Once the body
// has been read to its end — by readBody or by a route that reads its own,
// as the Durable Streams handler does — the header is taken back and the
// deadline cleared (see [keepAliveBody]), so the connection is kept alive
// for the next request. Over HTTP/2 an unread body costs only its stream,
// and Connection: close would end the whole connection, so only the
// deadline is set. The caller calls the returned func when the handler has
// returned: it puts back r's own body, which net/http inspects after the
// handler to close an unread body's connection gracefully (a half-close,
// then a wait, so that a client still sending reads the answer rather than
// a reset).
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) (restore func()) {
	if !hasBody(r) {
		return func() {}
	}
	restore = func() {}
	if r.ProtoMajor < 2 {
		w.Header().Set("Connection", "close")
		orig := r.Body
		r.Body = &keepAliveBody{ReadCloser: orig, w: w}
		restore = func() { r.Body = orig }
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout)) // ErrNotSupported: nothing to bound
	return restore
}

// keepAliveBody is a request body that, when a read reaches its end
// (io.EOF), takes back the Connection: close that boundBody set and
// clears the read deadline: the whole body is in, so the connection may
// serve the next request. It is read by the handler's goroutine, before
// the answer's header is written (after it, the change has no effect).
type keepAliveBody struct {
	io.ReadCloser
	w    http.ResponseWriter
	done bool
}

// Read reads from the body; at its end it keeps the connection (once).
func (b *keepAliveBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = http.NewResponseController(b.w).SetReadDeadline(time.Time{})
		b.w.Header().Del("Connection")
	}
	return n, err
}

// hasBody reports whether r comes with a body (a Content-Length above 0 or
// a chunked one).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// boundWrites sets the write deadline for r's answer to now +
// WriteTimeout (+ BodyTimeout for a request with a body, whose answer may
// come only when the body deadline has passed: the 408). The stream handlers take over from their first write: they
// set their own deadline before each write and clear it after (SSE), or
// after each write to the hijacked socket (WebSocket), so the deadline set
// here bounds only their refusals and the upgrade. A stream whose handler
// has no write timeout (its WriteTimeout < 0) gets none here either, and
// any deadline an earlier request left on the kept-alive connection is
// cleared, or it would cut the stream. Over HTTP/2 the deadline is the
// stream's own.
func (s *Server) boundWrites(w http.ResponseWriter, r *http.Request) {
	if s.writeTimeout <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	if _, pattern := s.mux.Handler(r); r.Method == http.MethodGet &&
		((pattern == sse.Pattern || pattern == sse.ManyPattern) && s.o.SSE.WriteTimeout < 0 || (pattern == ws.Pattern || pattern == ws.ManyPattern) && s.o.WS.WriteTimeout < 0) {
		_ = rc.SetWriteDeadline(time.Time{}) // ErrNotSupported: nothing was set
		return
	}
	d := s.writeTimeout
	if hasBody(r) {
		d += s.bodyTimeout
	}
	_ = rc.SetWriteDeadline(time.Now().Add(d)) // ErrNotSupported: nothing to bound
}

// recorder captures what the mux's fallback handlers answer.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(p), nil
}
