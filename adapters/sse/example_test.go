package sse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// The wire format: the retry line a stream starts with, a replayed event,
// the synthetic replay_complete frame (no id), a live event with an origin,
// a payload with raw line breaks, and a heartbeat.
func ExampleWriteEvent() {
	w := os.Stdout
	_, _ = io.WriteString(w, "retry: 3000\n\n") // what the handler writes first
	for _, ev := range []eventbus.Event{
		{ID: 41, Session: "s1", Type: "agent_message_chunk", Data: json.RawMessage(`{"text":"Hel"}`), Replay: true},
		{Session: "s1", Type: frame.TypeReplayComplete, Data: json.RawMessage(`{"lastReplayedEventId":41,"replayedCount":1}`)},
		{ID: 42, Session: "s1", Type: "tool_call", Data: json.RawMessage(`{"toolCallId":"t1","status":"pending"}`), Origin: "tab-7"},
		{ID: 43, Session: "s1", Type: "plan", Data: json.RawMessage("{\n  \"entries\": []\n}")},
	} {
		_ = sse.WriteEvent(w, ev, sse.EncodeOptions{})
	}
	_, _ = io.WriteString(w, ": heartbeat\n\n") // what it writes after 15 s of silence
	// With epoch-qualified ids (the handler's default; HandlerOptions.PlainIDs turns them off):
	_ = sse.WriteEvent(w, eventbus.Event{ID: 44, Session: "s1", Type: "plan"}, sse.EncodeOptions{Epoch: "9f3c"})
	// Output:
	// retry: 3000
	//
	// id: 41
	// event: agent_message_chunk
	// data: {"v":1,"id":41,"type":"agent_message_chunk","session":"s1","data":{"text":"Hel"},"replay":true}
	//
	// event: replay_complete
	// data: {"v":1,"type":"replay_complete","session":"s1","data":{"lastReplayedEventId":41,"replayedCount":1}}
	//
	// id: 42
	// event: tool_call
	// data: {"v":1,"id":42,"type":"tool_call","session":"s1","data":{"toolCallId":"t1","status":"pending"},"origin":"tab-7"}
	//
	// id: 43
	// event: plan
	// data: {"v":1,"id":43,"type":"plan","session":"s1","data":{
	// data:   "entries": []
	// data: }}
	//
	// : heartbeat
	//
	// id: 9f3c-44
	// event: plan
	// data: {"v":1,"id":44,"type":"plan","session":"s1"}
}

// Serving a session: mount the handler on a ServeMux at sse.Pattern. A
// client that resumes from id 1 gets what it missed, replay_complete, and
// live events; closing the session ends the response after session_closed.
func ExampleHandler() {
	bus, _ := eventbus.New(eventbus.Options{Epoch: "E1"})
	defer bus.Close()
	h, _ := sse.NewHandler(bus, sse.HandlerOptions{})
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, _ = bus.Publish("s1", "agent_message_chunk", map[string]string{"text": "Hel"})
	_, _ = bus.Publish("s1", "agent_message_chunk", map[string]string{"text": "lo"})

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/session/s1/events", nil)
	req.Header.Set("Last-Event-ID", "E1-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get(resume.HeaderEpoch))
	_ = bus.CloseSession("s1")
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// 200 OK text/event-stream E1
	// retry: 3000
	//
	// id: E1-2
	// event: agent_message_chunk
	// data: {"v":1,"id":2,"type":"agent_message_chunk","session":"s1","data":{"text":"lo"},"replay":true}
	//
	// event: replay_complete
	// data: {"v":1,"type":"replay_complete","session":"s1","data":{"lastReplayedEventId":2,"replayedCount":1,"firstReplayedEventId":2}}
	//
	// id: E1-3
	// event: session_closed
	// data: {"v":1,"id":3,"type":"session_closed","session":"s1","data":{"session":"s1","reason":"closed"}}
}

// Reading a session with the Go client: it reconnects with Last-Event-ID by
// itself, hands over events and synthetic frames alike, and stops after its
// own session's session_closed.
func ExampleClient() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	h, _ := sse.NewHandler(bus, sse.HandlerOptions{})
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, _ = bus.Publish("s1", "tool_call", map[string]string{"toolCallId": "t1"})
	_, _ = bus.Publish("s1", "tool_call_update", map[string]string{"toolCallId": "t1", "status": "completed"})

	s := sse.Subscribe(context.Background(), srv.URL+"/session/s1/events", sse.StreamOptions{})
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			fmt.Println("stopped:", err)
			return
		}
		fmt.Println(ev.ID, ev.Type, ev.Replay, string(ev.Data))
		if ev.ID == 2 {
			_ = bus.CloseSession("s1")
		}
	}
	// Output:
	// 1 tool_call true {"toolCallId":"t1"}
	// 2 tool_call_update true {"status":"completed","toolCallId":"t1"}
	// 3 session_closed false {"session":"s1","reason":"closed"}
	// stopped: eventbus: session closed
}
