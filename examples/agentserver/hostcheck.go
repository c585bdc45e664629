package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// loopbackHosts wraps h for a server that listens on a loopback address
// only: a request whose Host header does not name a loopback host
// (localhost, 127.0.0.0/8, ::1) is answered 421 misdirected_request, as
// JSON like every other error. That stops DNS rebinding: a web page whose
// own domain was re-pointed at 127.0.0.1 reaches this port with Host
// "evil.example:8080", is same-origin with it for the browser (so the
// WebSocket origin check passes too), and could otherwise read the
// sessions' streams, publish and close sessions. A server started with
// -addr :port (every interface) serves any Host.
//
// A refused request's body is never read: the answer carries Connection:
// close (net/http would otherwise wait for the body before answering), and
// what net/http reads of the body after the answer, to close cleanly, is
// bounded by bodyTimeout, so a POST whose body never arrives cannot hold the
// connection (server.Options.BodyTimeout bounds the requests let through).
func loopbackHosts(h http.Handler, bodyTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			if r.ContentLength != 0 && r.Body != http.NoBody {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
				if r.ProtoMajor < 2 {
					w.Header().Set("Connection", "close")
				}
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusMisdirectedRequest)
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false) // as every other answer
			_ = enc.Encode(map[string]string{
				"code": "misdirected_request",
				"message": fmt.Sprintf("Host %q is not a loopback name: this server listens on loopback only "+
					"(use localhost or 127.0.0.1, or start it with -addr :port to serve other hosts)", cut(r.Host, 64)),
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether a Host header value (host or host:port)
// names the local machine: "localhost" (any case, optionally with a
// trailing dot) or a loopback IP address.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// listensOnLoopbackOnly reports whether addr is a loopback address (not an
// unspecified one such as ":8080" or "0.0.0.0:8080").
func listensOnLoopbackOnly(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
