package sse

import (
	"context"
	"net"
)

// DefaultSendBuffer is the kernel send buffer [LimitSendBuffer] suggests for
// an SSE server: 128 KiB (Linux reserves twice that, 256 KiB, per
// connection). A stream of agent events needs far less; a server-side
// stall is ended by the write timeout long before it matters.
const DefaultSendBuffer = 128 << 10

// LimitSendBuffer returns an http.Server.ConnContext function that caps the
// kernel send buffer (SO_SNDBUF) of every accepted TCP connection at bytes,
// and passes ctx through unchanged:
//
//	srv := &http.Server{Handler: mux, ConnContext: sse.LimitSendBuffer(sse.DefaultSendBuffer)}
//
// Without it Linux grows each connection's send buffer on demand up to
// net.ipv4.tcp_wmem's maximum (4 MiB by default), and a client that stops
// reading pins that much kernel memory — memory the Go heap and RSS do not
// show — until the write timeout ends its stream. With a small buffer its
// writes block sooner, so the handler's write deadline cuts it off sooner
// and the live queue (bounded by MAX_QUEUED_BYTES) holds the rest, where it
// is counted. docs/operations.md sizes both.
//
// bytes ≤ 0 leaves the buffer alone. Connections that are not TCP (a unix
// socket, a test pipe) are left alone; TLS connections are limited on the
// TCP connection beneath. Setting the buffer also turns off the kernel's
// auto-tuning for that connection. Errors are ignored: the connection
// works either way.
func LimitSendBuffer(bytes int) func(ctx context.Context, c net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if bytes <= 0 {
			return ctx
		}
		for range 4 { // unwrap tls.Conn and similar wrappers
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetWriteBuffer(bytes)
				return ctx
			}
			u, ok := c.(interface{ NetConn() net.Conn })
			if !ok {
				return ctx
			}
			c = u.NetConn()
		}
		return ctx
	}
}
