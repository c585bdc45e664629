package natscluster

import (
	"net"
	"sync"
)

// Link is a TCP relay from a loopback port to a target address, which can
// be cut (every relayed connection closed, new ones refused) and restored.
// Safe for concurrent use.
type Link struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
	wg    sync.WaitGroup
}

// NewLink relays a new port on 127.0.0.1 to target (host:port).
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the relay's host:port.
func (l *Link) Addr() string { return l.ln.Addr().String() }

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		cut := l.cut
		l.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l.mu.Lock()
		if l.cut { // cut while dialling
			l.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		l.conns[c], l.conns[up] = struct{}{}, struct{}{}
		l.wg.Add(2)
		l.mu.Unlock()
		go l.pipe(up, c)
		go l.pipe(c, up)
	}
}

func (l *Link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	l.mu.Lock()
	delete(l.conns, src)
	delete(l.conns, dst)
	l.mu.Unlock()
	_ = src.Close()
	_ = dst.Close()
}

// Cut closes every relayed connection and refuses new ones until Restore.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		_ = c.Close()
	}
}

// Restore accepts connections again after Cut.
func (l *Link) Restore() {
	l.mu.Lock()
	l.cut = false
	l.mu.Unlock()
}

// Close stops the relay and closes its connections; it waits for its
// goroutines.
func (l *Link) Close() {
	_ = l.ln.Close()
	l.Cut()
	l.wg.Wait()
}
