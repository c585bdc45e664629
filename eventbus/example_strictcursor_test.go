package eventbus_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// A reader that must answer "gone" rather than read on after a gap (a
// Durable Streams read of an offset) subscribes with StrictCursor and
// learns a lost position as a typed error, not from a frame: here the
// replay buffer of 3 evicted the events after id 1.
func ExampleSubscribeOptions_strictCursor() {
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 3, Epoch: "e1"})
	if err != nil {
		panic(err)
	}
	defer bus.Close()
	for i := 1; i <= 5; i++ {
		if _, err := bus.Publish("run", "tick", i); err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	_, err = bus.Subscribe(ctx, "run", eventbus.SubscribeOptions{Cursor: eventbus.At(1), StrictCursor: true})
	var lost *eventbus.PositionLostError
	if errors.As(err, &lost) {
		fmt.Println(lost.Reason, lost.LastDeliveredID, lost.CompleteFromID)
	}
	info, _ := bus.SessionInfo("run")
	fmt.Println("newest id", info.LastEventID)
	// Output:
	// ring_evicted 1 3
	// newest id 5
}
