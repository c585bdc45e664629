package aisdk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"

	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/codec"
)

// A reply and its end, as the AI SDK's UI-message stream.
func ExampleEncoder() {
	enc := aisdk.NewEncoder("msg-1")
	b := enc.Start(nil)
	b = enc.Append(b, codec.Part{Kind: codec.Text, ID: 7, Text: "Hello"})
	b = enc.Finish(b, codec.ReasonComplete, "")
	fmt.Print(string(b))
	// Output:
	// data: {"type":"start","messageId":"msg-1"}
	//
	// data: {"type":"text-start","id":"text-7"}
	//
	// data: {"type":"text-delta","id":"text-7","delta":"Hello"}
	//
	// data: {"type":"text-end","id":"text-7"}
	//
	// data: {"type":"finish","finishReason":"stop"}
	//
	// data: [DONE]
}

// A chat route whose Start runs the reply of a made-up model in the
// turn: POST /api/chat with the body DefaultChatTransport sends.
func ExampleHandler() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	h, _ := aisdk.NewHandler(bus, aisdk.HandlerOptions{Start: func(r *http.Request, m aisdk.Message) (string, error) {
		t, err := bus.StartTurn(context.Background(), m.Chat, eventbus.TurnOptions{ID: "turn-1"})
		if err != nil {
			return "", err
		}
		go func() {
			n := acp.Notification{SessionID: m.Chat, Update: acp.MessageChunk("You said: " + m.Text)}
			_, _ = t.Publish(n.Type(), n)
			_, _ = t.End(nil)
		}()
		return t.ID(), nil
	}})
	body := `{"id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`
	req := httptest.NewRequest(http.MethodPost, "/api/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get(aisdk.HeaderStream))
	fmt.Print(rec.Body.String())
	// Output:
	// 200 v1
	// data: {"type":"start","messageId":"turn-1"}
	//
	// data: {"type":"text-start","id":"text-2"}
	//
	// data: {"type":"text-delta","id":"text-2","delta":"You said: hi"}
	//
	// data: {"type":"text-end","id":"text-2"}
	//
	// data: {"type":"finish","finishReason":"stop"}
	//
	// data: [DONE]
}
