package eventbus_test

import (
	"context"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// ExampleBus_SendTo sends a permission request to one subscriber only: it
// arrives without id, in order with the published events, and the next
// published event gets the id it would have got anyway.
func ExampleBus_SendTo() {
	bus, _ := eventbus.New(eventbus.Options{})
	defer bus.Close()
	alice, _ := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	bob, _ := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	defer alice.Close()
	defer bob.Close()

	_, _ = bus.Publish("s1", "tool_call", map[string]string{"title": "rm -rf build/"})
	_ = bus.SendTo("permission_request", map[string]string{"tool": "rm"}, alice)
	_, _ = bus.Publish("s1", "tool_call_update", map[string]string{"status": "completed"})

	for _, sub := range []*eventbus.Subscription{alice, bob} {
		for {
			ev, ok := sub.TryNext()
			if !ok {
				break
			}
			fmt.Println(sub == alice, ev.ID, ev.Type)
		}
	}
	// Output:
	// true 1 tool_call
	// true 0 permission_request
	// true 2 tool_call_update
	// false 1 tool_call
	// false 2 tool_call_update
}
