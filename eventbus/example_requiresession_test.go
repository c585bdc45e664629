package eventbus_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// A server subscribes with RequireSession, so that a misspelled id is an
// error instead of a new, empty session whose subscriber waits forever
// (issue 18.13). Without it, Subscribe creates the session, as AgentPool's
// subscribe does.
func ExampleSubscribeOptions_requireSession() {
	bus, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer bus.Close()
	if err := bus.CreateSession("run-1", ""); err != nil {
		panic(err)
	}
	ctx := context.Background()

	_, err = bus.Subscribe(ctx, "run-l", eventbus.SubscribeOptions{RequireSession: true}) // "l" for "1"
	fmt.Println(errors.Is(err, eventbus.ErrSessionNotFound), bus.SessionExists("run-l"))

	sub, err := bus.Subscribe(ctx, "run-l", eventbus.SubscribeOptions{}) // the default creates it
	fmt.Println(err, bus.SessionExists("run-l"))
	sub.Close()
	// Output:
	// true false
	// <nil> true
}
