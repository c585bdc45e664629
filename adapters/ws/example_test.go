package ws_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// Example mounts the WebSocket handler, greets each connection with a
// targeted frame, and reads the session with the resuming Go client: the
// replayed event, the greeting (no id), then session_closed, which ends the
// stream.
func Example() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	_, _ = bus.Publish("s1", "note", map[string]string{"text": "hi"})

	h, _ := ws.NewHandler(bus, ws.HandlerOptions{
		OnSubscribe: func(_ *http.Request, sub *eventbus.Subscription) {
			_ = bus.SendTo("hello", map[string]string{"to": "this connection"}, sub)
		},
	})
	mux := http.NewServeMux()
	mux.Handle(ws.Pattern, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Shutdown(context.Background()) //nolint:errcheck

	stream := ws.Subscribe(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/session/s1/ws", ws.StreamOptions{})
	defer stream.Close()
	for {
		ev, err := stream.Next()
		if err != nil {
			fmt.Println("end:", err)
			return
		}
		fmt.Println(ev.ID, ev.Type, string(ev.Data))
		if ev.Type == "hello" {
			_ = bus.CloseSession("s1")
		}
	}
	// Output:
	// 1 note {"text":"hi"}
	// 0 hello {"to":"this connection"}
	// 2 session_closed {"session":"s1","reason":"closed"}
	// end: eventbus: session closed
}
