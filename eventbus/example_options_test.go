package eventbus_test

import (
	"fmt"
	"time"

	"github.com/replaybus/replaybus/eventbus"
)

func ExampleOptions_Validate() {
	o := eventbus.Options{
		ReplayBufferSize: 1000,
		MaxQueueSize:     -5,
		SessionTTL:       100 * time.Millisecond,
	}
	fmt.Println(o.Validate())
	fmt.Println(eventbus.Options{}.Validate())
	// Output:
	// eventbus: MaxQueueSize=-5: out of range [1, 1000000]
	// eventbus: SessionTTL=100ms: out of range [1s, 8760h]
	// <nil>
}

func ExampleOptions_WithDefaults() {
	o := eventbus.Options{ReplayBufferSize: 50}.WithDefaults()
	fmt.Println(o.ReplayBufferSize, o.MaxQueueSize, o.MaxQueuedBytes, o.MaxSubscribers)
	fmt.Printf("%v %q %v\n", o.SessionTTL, o.OverflowPolicy, o.ReplayBudgetBytes)
	// Output:
	// 50 1000 2097152 64
	// 1h0m0s "" 8388608
}
