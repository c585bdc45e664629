package aisdk_test

import (
	"fmt"

	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/codec"
)

// A reply and its end, as the AI SDK's UI-message stream.
func ExampleEncoder() {
	enc := aisdk.NewEncoder("msg-1")
	b := enc.Start(nil)
	b = enc.Append(b, codec.Part{Kind: codec.Text, ID: 7, Text: "Hello"})
	b = enc.Finish(b, codec.ReasonComplete, "")
	fmt.Print(string(b))
	// Output:
	// data: {"type":"start","messageId":"msg-1"}
	//
	// data: {"type":"text-start","id":"text-7"}
	//
	// data: {"type":"text-delta","id":"text-7","delta":"Hello"}
	//
	// data: {"type":"text-end","id":"text-7"}
	//
	// data: {"type":"finish","finishReason":"stop"}
	//
	// data: [DONE]
}
