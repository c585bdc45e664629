package config_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// setenv sets variables for one example and returns a function that unsets
// them (examples cannot use t.Setenv).
func setenv(kv ...string) (unset func()) {
	for i := 0; i < len(kv); i += 2 {
		os.Setenv(kv[i], kv[i+1])
	}
	return func() {
		for i := 0; i < len(kv); i += 2 {
			os.Unsetenv(kv[i])
		}
	}
}

func ExampleLoad() {
	defer setenv(
		"AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", "200",
		"AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES", "512KiB",
		"AGENTPOOL_EVENTBUS_SESSION_TTL", "30m",
		"AGENTPOOL_EVENTBUS_DROPPABLE_TYPES", "agent_message_chunk, agent_thought_chunk",
	)()

	cfg, err := config.Load()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.ReplayBufferSize, cfg.MaxQueueSize, cfg.MaxQueuedBytes, cfg.SessionTTL)
	fmt.Printf("%q %v\n", cfg.OverflowPolicy, cfg.DroppableTypes)
	// Output:
	// 200 1000 524288 30m0s
	// "" [agent_message_chunk agent_thought_chunk]
}

func ExampleLoad_errors() {
	defer setenv(
		"AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", "0",
		"AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE", "abc",
		"AGENTPOOL_EVENTBUS_OVERFLOW_POLICY", "block",
		"AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE", "200",
	)()

	_, err := config.Load()
	fmt.Println(err)

	var ve *config.VarError
	if errors.As(err, &ve) {
		fmt.Printf("first: %s (value %q)\n", ve.Var, ve.Value)
	}
	fmt.Println(errors.Is(err, eventbus.ErrOutOfRange), errors.Is(err, config.ErrUnknownVariable))
	// Output:
	// AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE="abc": not an integer
	// AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]
	// AGENTPOOL_EVENTBUS_OVERFLOW_POLICY="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)
	// AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE?)
	// first: AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE (value "abc")
	// true true
}

func ExampleLoadWith() {
	defer setenv(
		"AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", "200",
		"AGENTPOOL_EVENTBUS_MAX_SUBSCRIBERS", "16",
	)()

	// The program pins the replay buffer; operators still set the rest.
	cfg, err := config.LoadWith(eventbus.Options{ReplayBufferSize: 500})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.ReplayBufferSize, cfg.MaxSubscribers)
	// Output:
	// 500 16
}
