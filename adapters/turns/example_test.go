package turns_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
)

// ExampleHandler mounts the turn routes and stops a producer's turn with
// POST /session/{id}/cancel: the producer's context ends, and GET
// /session/{id}/turn then answers 204.
func ExampleHandler() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	_ = bus.CreateSession("chat", "")
	turn, _ := bus.StartTurn(context.Background(), "chat", eventbus.TurnOptions{ID: "t1"})

	th, _ := turns.NewHandler(bus, turns.HandlerOptions{})
	mux := http.NewServeMux()
	mux.Handle(turns.CancelPattern, th.Cancel())
	mux.Handle(turns.TurnPattern, th.Turn())
	mux.Handle(turns.PresencePattern, th.Presence())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	show := func(resp *http.Response, _ error) {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprint(resp.StatusCode, " ", string(b))))
	}
	show(http.Get(srv.URL + "/session/chat/presence"))
	show(http.Post(srv.URL+"/session/chat/cancel", "application/json", strings.NewReader(`{"turn":"t1"}`)))
	<-turn.Context().Done()
	show(http.Get(srv.URL + "/session/chat/turn"))
	show(http.Post(srv.URL+"/session/chat/cancel", "application/json", strings.NewReader(`{"turn":"t1"}`)))
	// Output:
	// 200 {"session":"chat","clients":0,"status":"idle","turn":"t1"}
	// 202 {"cancelled":["t1"],"held":[]}
	// 204
	// 409 {"code":"turn_ended","message":"turn ended: turn \"t1\" of session \"chat\""}
}
