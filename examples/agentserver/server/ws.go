package server

import (
	"net/http"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// TypeHello is the type of the targeted frame the server sends each new
// connection when Options.Hello is set: a frame for that connection alone
// (eventbus.Bus.SendTo), without id, never replayed.
const TypeHello = "hello"

// HelloData is the payload of a hello frame.
type HelloData struct {
	Subscriber uint64 `json:"subscriber"` // the connection's subscription id
	Transport  string `json:"transport"`  // "sse" or "websocket"
	Message    string `json:"message"`
}

// greeter wraps an OnSubscribe hook: the application's own first, then,
// with Options.Hello, the targeted hello.
func (s *Server) greeter(transport string, next func(*http.Request, *eventbus.Subscription)) func(*http.Request, *eventbus.Subscription) {
	if !s.o.Hello {
		return next
	}
	return func(r *http.Request, sub *eventbus.Subscription) {
		if next != nil {
			next(r, sub)
		}
		err := s.bus.SendTo(TypeHello, HelloData{
			Subscriber: sub.ID(), Transport: transport,
			Message: "hello from the agent server: this frame went to this connection only (no id, not replayed)",
		}, sub)
		if err != nil {
			s.log.Debug("hello not sent", "subscriber", sub.ID(), "error", err)
		}
	}
}

// newWS makes the WebSocket handler and mounts it at ws.Pattern with the
// same path-id check as the SSE endpoint.
func (s *Server) newWS() error {
	o := s.o.WS
	if o.Logger == nil {
		o.Logger = s.log
	}
	o.OnSubscribe = s.greeter("websocket", o.OnSubscribe)
	h, err := ws.NewHandler(s.bus, o)
	if err != nil {
		return err
	}
	s.ws = h
	s.handle(ws.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if validPathID(w, r) && s.ready(w) {
			h.ServeHTTP(w, r)
		}
	}))
	s.handle(ws.ManyPattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ready(w) {
			h.ServeHTTP(w, r)
		}
	}))
	return nil
}

// WS returns the WebSocket handler, for its [ws.Handler.Stats].
func (s *Server) WS() *ws.Handler { return s.ws }
