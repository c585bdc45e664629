package server

import (
	"net/http"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
)

// streamAllow returns the Allow list of r's path when it is a stream route
// (the SSE events route takes GET and POST, the WebSocket route GET; HEAD
// neither, though the mux lets GET routes match it), and "" for any other
// path.
func streamAllow(mux *http.ServeMux, r *http.Request) string {
	get := &http.Request{Method: http.MethodGet, URL: r.URL, Host: r.Host, Header: http.Header{}}
	switch _, pattern := mux.Handler(get); pattern {
	case sse.Pattern:
		return "GET, POST"
	case ws.Pattern:
		return "GET"
	}
	return ""
}
