package eventbus_test

import (
	"context"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// ExampleBus_StartTurn runs a producer's turn: turn_start, the reply, and
// one turn_end; the bus answers "is a turn active?" from the log.
func ExampleBus_StartTurn() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	_ = bus.CreateSession("chat", "")

	turn, _ := bus.StartTurn(context.Background(), "chat", eventbus.TurnOptions{ID: "t1"})
	active, _ := bus.Turn("chat", "")
	fmt.Println("active:", active.Turn, "from id", active.StartID)
	_, _ = turn.Publish("agent_message_chunk", map[string]string{"text": "Hello"})
	end, _ := turn.End(nil)
	fmt.Println(end.ID, end.Type, string(end.Data))

	_, ok := bus.Turn("chat", "")
	info, _ := bus.Turn("chat", "t1")
	fmt.Println("active:", ok, "ended:", info.Reason, "at", info.EndID)
	// Output:
	// active: t1 from id 1
	// 3 turn_end {"turn":"t1","reason":"complete"}
	// active: false ended: complete at 3
}

// ExampleBus_Cancel is a stop button: the cancel is a record in the log,
// the producer's context ends, and the turn's end follows at once.
func ExampleBus_Cancel() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	_ = bus.CreateSession("chat", "")
	turn, _ := bus.StartTurn(context.Background(), "chat", eventbus.TurnOptions{ID: "t1"})

	res, _ := bus.Cancel(context.Background(), "chat", frame.TurnData{By: "alice"})
	<-turn.Context().Done()
	fmt.Println("cancelled:", res.Cancelled)

	end, _ := turn.End(nil) // the producer notices; the turn has ended already
	fmt.Println(string(end.Data))

	sub, _ := bus.Subscribe(context.Background(), "chat", eventbus.SubscribeOptions{})
	defer sub.Close()
	for {
		ev, ok := sub.TryNext()
		if !ok {
			break
		}
		fmt.Println(ev.ID, ev.Type)
	}
	// Output:
	// cancelled: [t1]
	// {"turn":"t1","reason":"cancelled"}
	// 1 turn_start
	// 2 turn_cancel
	// 3 turn_end
}
