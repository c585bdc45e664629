package ws

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxCork bounds the bytes held back while the writer batches frames.
const maxCork = 64 << 10

// hijackRecorder hands the upgrade a corkable connection and keeps the raw
// one, so that the close grace can cut a socket whose peer stopped reading.
type hijackRecorder struct {
	http.ResponseWriter
	wt   time.Duration
	conn net.Conn  // the raw connection
	cork *corkConn // what coder/websocket writes through
}

func (hr *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(hr.ResponseWriter).Hijack()
	if err != nil {
		return c, brw, err
	}
	if err := brw.Writer.Flush(); err != nil {
		return c, brw, err
	}
	hr.conn = c
	hr.cork = &corkConn{Conn: c, wt: hr.wt}
	return hr.cork, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(hr.cork, 4096)), nil
}

// corkConn is every write's path to the socket; each write has the write
// timeout as its deadline, cleared after it, so an idle socket never has
// one. coder/websocket frames every message and control frame and writes
// them here; between cork and uncork those writes (each a whole frame or,
// for a message over the library's 4 KiB buffer, its pieces in order) are
// collected, and uncork writes them at once, as the SSE handler flushes
// once per batch. A control frame written by another goroutine meanwhile
// (a ping, a pong, the close) joins the batch between two messages: the
// library writes one frame at a time. Safe for concurrent use.
type corkConn struct {
	net.Conn
	wt time.Duration

	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= maxCork {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.writeLocked(p)
}

// writeLocked writes p to the socket under the write deadline: every byte
// this connection sends goes through here.
func (c *corkConn) writeLocked(p []byte) (int, error) {
	if c.wt > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.wt))
		defer c.Conn.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort: an idle socket has no deadline
	}
	return c.Conn.Write(p)
}

func (c *corkConn) corkWrites() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was collected, within the write timeout.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.writeLocked(c.buf)
	if cap(c.buf) > 2*maxCork {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}
