package sse

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Taking an HTTP/1.x connection over.
//
// An idle stream served by net/http keeps what net/http keeps for every
// request in progress: the connection's 4 KiB read buffer and 4 KiB write
// buffer, the response's 2 KiB chunking buffer, the request, and two
// goroutines (the one serving it, 8 KiB of stack, and a 2 KiB background
// reader that notices the client going away) — about 22 KiB of the 28 KiB
// an idle stream costs. With HandlerOptions.Hijack, once a stream is
// subscribed, the handler takes its connection over (http.Hijacker): it
// writes the answer's head itself (Connection: close, the body ending
// with the connection, as HTTP/1.x allows a body without a length), and
// serves the stream on a goroutine of its own, with no buffer while it is
// idle (a batch is built in a pooled one and written with one write), and
// a goroutine that reads the connection to learn when the client goes
// (what net/http's background reader did). net/http's buffers and its
// goroutine are then released. HTTP/2 streams, a ResponseWriter that
// cannot be hijacked (a wrapper without Unwrap, a recorder), and an answer
// a middleware set a Content-Encoding on (it encodes the body in its
// writer) stay on net/http.

// takeOver hijacks w's connection for the stream s and serves it on a
// goroutine of its own; false when it did not (Hijack off, HTTP/2, a
// writer that cannot be hijacked), and the stream stays on net/http.
func (h *Handler) takeOver(w http.ResponseWriter, r *http.Request, s *opened) bool {
	if s.st.cancel == nil { // opened without a context of its own: see mayTakeOver
		return false
	}
	hd := w.Header()
	if hd.Get("Content-Encoding") != "" {
		// A middleware encodes the body (compression) in its writer,
		// which a taken-over stream would bypass under its header.
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// Bytes the client sent after its request (a pipelined one) are
	// dropped with net/http's reader: nothing follows a stream's answer.
	s.detach() // the stream no longer ends with the request, which ends now
	go h.serveConn(conn, hd, r.RemoteAddr, s)
	return true
}

// mayTakeOver reports whether a stream of r may take its connection over:
// Hijack on and HTTP/1.x. Such a stream gets a context of its own in open.
func (h *Handler) mayTakeOver(r *http.Request) bool { return h.o.Hijack && r.ProtoMajor == 1 }

// serveConn serves the stream s on conn until it ends, then closes conn.
func (h *Handler) serveConn(conn net.Conn, hd http.Header, remote string, s *opened) {
	var wg sync.WaitGroup
	wg.Go(func() {
		// The client closing its end (or the connection breaking) ends
		// the stream at once, not at the next heartbeat's failed write.
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				s.cancel()
				return
			}
		}
	})
	reason := h.stream(s.ctx, &connWriter{conn: conn, header: hd}, s.sub, s.session, s.enc, s.st, s.live, s.start)
	_ = conn.Close() // also ends the reader
	wg.Wait()
	s.close(h)
	s.ended(h, remote, reason)
}

// connWriter is the http.ResponseWriter of a taken-over stream: it writes
// the answer's head itself and collects each batch's frames in a pooled
// buffer that FlushError writes with one write. http.ResponseController
// finds its FlushError and SetWriteDeadline.
type connWriter struct {
	conn   net.Conn
	header http.Header
	head   bool    // the status line and headers are in buf (or sent)
	buf    *[]byte // what is written but not flushed; nil while idle
}

// writeBufs holds the taken-over streams' write buffers between batches.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

func (c *connWriter) Header() http.Header { return c.header }

// WriteHeader puts the status line and the headers in front of the body:
// Connection: close and no length (the body ends with the connection).
func (c *connWriter) WriteHeader(code int) {
	if c.head {
		return
	}
	c.head = true
	c.header.Del("Content-Length")
	c.header.Del("Transfer-Encoding")
	c.header.Set("Connection", "close")
	if c.header.Get("Date") == "" {
		c.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(code) + " " + http.StatusText(code) + "\r\n")
	_ = c.header.Write(&b)
	b.WriteString("\r\n")
	c.append(b.Bytes())
}

func (c *connWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	c.append(p)
	return len(p), nil
}

func (c *connWriter) append(p []byte) {
	if c.buf == nil {
		c.buf = writeBufs.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
}

// FlushError writes what was written since the last flush.
func (c *connWriter) FlushError() error {
	if c.buf == nil {
		return nil
	}
	_, err := c.conn.Write(*c.buf)
	if cap(*c.buf) <= maxPooledWrite {
		*c.buf = (*c.buf)[:0]
		writeBufs.Put(c.buf)
	}
	c.buf = nil
	return err
}

// maxPooledWrite bounds the buffers the pool keeps: a batch is at most
// maxBatchBytes plus one frame.
const maxPooledWrite = 2 * maxBatchBytes

// SetWriteDeadline bounds the next flush.
func (c *connWriter) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// detach makes the stream outlive its request's context (a taken-over
// stream ends with its connection instead); see open.
func (s *opened) detach() { s.stop() }
