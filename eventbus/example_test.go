package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// Publish to a session, then subscribe: the history comes first (Replay is
// set on those copies), then live events.
func Example() {
	b, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	b.Publish("s1", "agent_message_chunk", map[string]string{"text": "Hel"})
	b.Publish("s1", "agent_message_chunk", map[string]string{"text": "lo"})

	sub, err := b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	b.Publish("s1", "tool_call", map[string]string{"title": "Read file"})

	for i := 0; i < 3; i++ {
		ev, err := sub.Next(context.Background())
		if err != nil {
			panic(err)
		}
		fmt.Println(ev.ID, ev.Type, ev.Replay, string(ev.Data))
	}
	// Output:
	// 1 agent_message_chunk true {"text":"Hel"}
	// 2 agent_message_chunk true {"text":"lo"}
	// 3 tool_call false {"title":"Read file"}
}

// A client resumes with its Last-Event-ID. The replay buffer keeps the last
// three events, so events 2 and 3 are gone: a state_resync_required frame
// (no id) says so before the replay, and replay_complete ends it.
func ExampleBus_Subscribe_resume() {
	b, err := eventbus.New(eventbus.Options{ReplayBufferSize: 3})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for i := 1; i <= 6; i++ {
		b.Publish("s1", "agent_message_chunk", nil)
	}

	sub, err := b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(1)})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	for {
		ev, ok := sub.TryNext()
		if !ok {
			break
		}
		if ev.ID == 0 {
			fmt.Println("frame", ev.Type, string(ev.Data))
		} else {
			fmt.Println("event", ev.ID, "replay", ev.Replay)
		}
	}
	// Output:
	// frame state_resync_required {"reason":"ring_evicted","lastDeliveredId":1,"completeFromId":4}
	// event 4 replay true
	// event 5 replay true
	// event 6 replay true
	// frame replay_complete {"lastReplayedEventId":6,"replayedCount":3,"firstReplayedEventId":4,"historyLost":true}
}

// A subscriber of a session with scope descendants hears its sub-agents'
// sessions too, including those created after it subscribed, as one stream
// ordered by id.
func ExampleBus_Subscribe_scopes() {
	b, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	b.CreateSession("main", "")
	b.CreateSession("worker", "main")

	sub, err := b.Subscribe(context.Background(), "main", eventbus.SubscribeOptions{Scope: scope.Descendants})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	b.CreateSession("worker.tool", "worker") // created after subscribing
	b.Publish("main", "plan", nil)
	b.Publish("worker", "tool_call", nil)
	b.Publish("other", "plan", nil) // another root: not in scope
	b.Publish("worker.tool", "tool_call_update", nil)
	b.CloseSession("worker.tool")

	for {
		ev, ok := sub.TryNext()
		if !ok {
			break
		}
		fmt.Println(ev.ID, ev.Session, ev.Type)
	}
	// Output:
	// 1 main plan
	// 2 worker tool_call
	// 4 worker.tool tool_call_update
	// 5 worker.tool session_closed
}

// A stream writer with heartbeats: wait for the next frame until one
// heartbeat interval after the last write; ErrTimeout means "write a
// heartbeat", and the subscription stays live.
func ExampleSubscription_NextBefore() {
	b, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	sub, err := b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	b.Publish("s1", "agent_message_chunk", map[string]string{"text": "hi"})

	const heartbeat = 20 * time.Millisecond
	lastWrite := time.Now()
	for range 2 {
		ev, err := sub.NextBefore(lastWrite.Add(heartbeat))
		switch {
		case errors.Is(err, eventbus.ErrTimeout):
			fmt.Println(": heartbeat")
		case err != nil:
			panic(err) // the subscription ended: err says why
		default:
			fmt.Println(ev.ID, ev.Type)
		}
		lastWrite = time.Now()
	}
	// Output:
	// 1 agent_message_chunk
	// : heartbeat
}

// A resume read in batches, as a stream writer takes what is ready before
// one flush: the replay, replay_complete and the live event published
// meanwhile, built in place in one buffer.
func ExampleSubscription_NextBatch() {
	b, err := eventbus.New(eventbus.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for _, text := range []string{"a", "b", "c"} {
		b.Publish("s1", "agent_message_chunk", map[string]string{"text": text})
	}
	sub, err := b.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(1)})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	b.Publish("s1", "tool_call", map[string]string{"title": "Read file"})

	buf := make([]eventbus.Event, 64)
	n, err := sub.NextBatch(time.Now().Add(time.Second), buf)
	if err != nil {
		panic(err)
	}
	for _, ev := range buf[:n] {
		fmt.Println(ev.ID, ev.Type, ev.Replay)
	}
	// Output:
	// 2 agent_message_chunk true
	// 3 agent_message_chunk true
	// 0 replay_complete false
	// 4 tool_call false
}
