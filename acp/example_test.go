package acp_test

import (
	"fmt"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
)

// Publish a reply, a tool call and its result as ACP session/update
// notifications.
func ExamplePublish() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()

	ev, _ := acp.Publish(bus, "run-1", acp.MessageChunk("Hel"))
	fmt.Println(ev.Type, string(ev.Data))
	ev, _ = acp.Publish(bus, "run-1", acp.ToolCall{ToolCallID: "t1", Title: "List files", Kind: "execute",
		RawInput: map[string]string{"command": "ls"}})
	fmt.Println(ev.Type, string(ev.Data))
	ev, _ = acp.Publish(bus, "run-1", acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusCompleted,
		Content: []acp.ToolCallContent{acp.TextContent("a.go")}})
	fmt.Println(ev.Type, string(ev.Data))
	// Output:
	// agent_message_chunk {"sessionId":"run-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}
	// tool_call {"sessionId":"run-1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"List files","kind":"execute","rawInput":{"command":"ls"}}}
	// tool_call_update {"sessionId":"run-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a.go"}}]}}
}

// Read a payload back as a typed update.
func ExampleParse() {
	n, err := acp.Parse([]byte(`{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}`))
	if err != nil {
		panic(err)
	}
	c := n.Update.(acp.ContentChunk)
	fmt.Println(n.Type(), c.Content.Text)
	// Output:
	// agent_thought_chunk hmm
}
