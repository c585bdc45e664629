package agentpool_test

import (
	"fmt"

	"github.com/replaybus/replaybus/agentpool"
	"github.com/replaybus/replaybus/eventbus"
)

// Publish a streamed reply and a tool call in AgentPool's shapes.
func ExamplePublish() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()

	ev, _ := agentpool.Publish(bus, "run-1", agentpool.TextDelta(0, "Hel"))
	fmt.Println(ev.Type, string(ev.Data))
	ev, _ = agentpool.Publish(bus, "run-1", agentpool.ToolCallStart{ToolCallID: "tc1", ToolName: "ls", Title: "List files",
		Kind: "execute", RawInput: map[string]string{"path": "."}})
	fmt.Println(ev.Type, string(ev.Data))
	// Output:
	// part_delta {"index":0,"delta":{"part_delta_kind":"text","content_delta":"Hel"},"event_kind":"part_delta"}
	// tool_call_start {"tool_call_id":"tc1","tool_name":"ls","title":"List files","kind":"execute","raw_input":{"path":"."},"event_kind":"tool_call_start"}
}
