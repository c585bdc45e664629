package eventbus_test

import (
	"context"
	"fmt"
	"log"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// The README's quick start, run by go test: configure from the environment,
// build a session tree, publish, resume a subtree from a cursor, and end.
func Example_quickStart() {
	// eventbus.New does not read the environment: config.LoadWithDefaults
	// takes the program's defaults, lets every AGENTPOOL_EVENTBUS_* variable
	// set override them, and validates the result.
	cfg, err := config.LoadWithDefaults(eventbus.Options{ReplayBufferSize: 100})
	if err != nil {
		log.Fatal(err) // names the bad variable and value
	}
	bus, err := eventbus.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close()

	bus.CreateSession("run-1", "")                 // a root session
	bus.CreateSession("run-1.researcher", "run-1") // a sub-agent below it
	// ACP session/update shapes, which ?coalesce=acp and compaction merge
	acp.Publish(bus, "run-1", acp.MessageChunk("Hel"))
	acp.Publish(bus, "run-1.researcher", acp.ToolCall{ToolCallID: "t1", Title: "search"})
	acp.Publish(bus, "run-1", acp.MessageChunk("lo"))

	// A client reconnecting with Last-Event-ID: 1, hearing the whole subtree.
	ctx := context.Background()
	sub, err := bus.Subscribe(ctx, "run-1", eventbus.SubscribeOptions{
		Scope: scope.Descendants, Cursor: eventbus.At(1), // a Position{ID, Epoch}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	// The run ends: each session publishes session_closed, and the
	// subscription of run-1 ends after delivering it.
	bus.CloseSessionTree("run-1")
	for ev, err := range sub.All(ctx) { // replayed history, replay_complete, live events
		if err != nil {
			fmt.Println("end:", err) // ErrSessionClosed, ErrEvicted, ErrClosed, ctx.Err()
			return
		}
		fmt.Println(ev.ID, ev.Type, ev.Session, ev.Replay)
	}
	// Output:
	// 2 tool_call run-1.researcher true
	// 3 agent_message_chunk run-1 true
	// 0 replay_complete run-1 false
	// 4 session_closed run-1.researcher false
	// 5 session_closed run-1 false
	// end: eventbus: session closed
}
