package nats_test

import (
	"context"
	"fmt"

	natsgo "github.com/nats-io/nats.go"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
)

// Two bus nodes on one embedded JetStream server: an event published on
// one reaches a subscriber of the other, with the same id.
func Example() {
	srv, err := embedded.RunServer(embedded.ServerConfig{}) // data under os.TempDir(), removed by Shutdown
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	ctx := context.Background()

	a, err := rbnats.Connect(ctx, srv.ClientURL(), eventbus.Options{}, rbnats.WithStream("EXAMPLE"), rbnats.WithSubjectPrefix("example"))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	nc, err := natsgo.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	b, err := rbnats.New(ctx, nc, eventbus.Options{}, rbnats.WithStream("EXAMPLE"), rbnats.WithSubjectPrefix("example"))
	if err != nil {
		panic(err)
	}
	defer b.Close()

	// A subscriber on node b, then a publish on node a.
	sub, err := b.Subscribe(ctx, "agent.1", eventbus.SubscribeOptions{})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	ev, err := a.Publish("agent.1", "agent_message_chunk", map[string]string{"text": "hello"})
	if err != nil {
		panic(err)
	}
	fmt.Println("published on a:", ev.ID, "same epoch:", a.Epoch() == b.Epoch())
	got, err := sub.Next(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("received on b:", got.ID, got.Type, string(got.Data))
	// Output:
	// published on a: 1 same epoch: true
	// received on b: 1 agent_message_chunk {"text":"hello"}
}
