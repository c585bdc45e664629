package eventbus_test

import (
	"context"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// A producer that streams many events publishes them through a pipeline:
// over NATS JetStream up to Window acks stay in flight instead of one
// round trip per event; OnStored reports each event with its id, in
// order. On the in-memory bus every Publish completes at once.
func ExampleNewPipeline() {
	bus, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer bus.Close()
	pl, err := eventbus.NewPipeline(bus, eventbus.PipelineOptions{
		Window:   64,
		OnStored: func(ev eventbus.Event) { fmt.Println("stored", ev.ID, ev.Type) },
	})
	if err != nil {
		panic(err)
	}
	for _, tok := range []string{"Hel", "lo"} {
		if err := pl.Publish("s1", "agent_message_chunk", map[string]string{"text": tok}); err != nil {
			panic(err)
		}
	}
	// Flush waits for every event in flight; a *PipelineError would list
	// the events whose fate is unknown.
	fmt.Println("flush:", pl.Flush(context.Background()))
	// Output:
	// stored 1 agent_message_chunk
	// stored 2 agent_message_chunk
	// flush: <nil>
}
