package codec_test

import (
	"fmt"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// Decode a turn's events into parts: known shapes become typed parts, an
// unknown event a Data part.
func Example() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	var evs []eventbus.Event
	add := func(ev eventbus.Event, err error) { evs = append(evs, ev) }
	add(acp.Publish(bus, "s1", acp.ThoughtChunk("Look first.")))
	add(acp.Publish(bus, "s1", acp.ToolCall{ToolCallID: "t1", Title: "List files", Kind: "execute", RawInput: map[string]string{"cmd": "ls"}}))
	add(acp.Publish(bus, "s1", acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent("a.go")}}))
	add(acp.Publish(bus, "s1", acp.MessageChunk("One file.")))
	add(bus.Publish("s1", "note", map[string]string{"by": "app"}))

	var parts []codec.Part
	for _, ev := range evs {
		parts = codec.Default.Decode(parts, ev)
	}
	for _, p := range parts {
		fmt.Printf("%d %-16s %s%s%s%s\n", p.ID, p.Kind, p.ToolCallID, p.Text, p.Input, p.Data)
	}
	// Output:
	// 1 reasoning        Look first.
	// 2 tool-input-start t1
	// 2 tool-input       t1{"cmd":"ls"}
	// 3 tool-output      t1a.go
	// 4 text             One file.
	// 5 data             {"by":"app"}
}
