package coalesce_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// Turn coalescing on with one option: what is queued when the consumer
// reads arrives merged, carrying the last merged id.
func Example() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	sub, _ := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP})
	defer sub.Close()

	for _, tok := range []string{"Hel", "lo, ", "world"} {
		_, _ = bus.Publish("s1", "agent_message_chunk", map[string]any{"sessionId": "s1",
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": tok}}})
	}
	_, _ = bus.Publish("s1", "tool_call", map[string]any{"sessionId": "s1",
		"update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}})

	for {
		ev, ok := sub.TryNext()
		if !ok {
			break
		}
		var d struct {
			Update struct{ Content struct{ Text string } }
		}
		_ = json.Unmarshal(ev.Data, &d)
		fmt.Printf("id %d %s count=%d firstId=%d %q\n", ev.ID, ev.Type, ev.Count, ev.FirstID, d.Update.Content.Text)
	}
	// Output:
	// id 3 agent_message_chunk count=3 firstId=1 "Hello, world"
	// id 4 tool_call count=0 firstId=0 ""
}

// A rule set of your own: copy a built-in one and add rules as values.
func ExampleCompile() {
	rs := coalesce.ACPRules
	rs.Name = "acp+logs"
	rs.Rules = append(append([]coalesce.Rule(nil), rs.Rules...), coalesce.Rule{
		Group: "log", Types: []string{"log_line"}, KeyPaths: []string{"stream"},
		Merge: coalesce.Merge{Op: coalesce.Concat, Path: "line"},
	})
	set, err := coalesce.Compile(rs)
	if err != nil {
		panic(err)
	}
	batch := []eventbus.Event{
		{ID: 1, Session: "s1", Type: "log_line", Data: []byte(`{"stream":"stdout","line":"a\n"}`)},
		{ID: 2, Session: "s1", Type: "log_line", Data: []byte(`{"stream":"stdout","line":"b\n"}`)},
		{ID: 3, Session: "s1", Type: "log_line", Data: []byte(`{"stream":"stderr","line":"oops\n"}`)},
	}
	for _, ev := range eventbus.Coalesce(set, batch) {
		fmt.Printf("id %d count=%d %s\n", ev.ID, ev.Count, ev.Data)
	}
	// Output:
	// id 2 count=2 {"line":"a\nb\n","stream":"stdout"}
	// id 3 count=0 {"stream":"stderr","line":"oops\n"}
}
