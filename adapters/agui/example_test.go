package agui_test

import (
	"fmt"

	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/codec"
)

// A reply and the run's end as AG-UI events, each frame with its id.
func ExampleEncoder() {
	enc := agui.NewEncoder(agui.Options{ThreadID: "s1", RunID: "turn-1", Epoch: "9f3c"})
	b := enc.Append(nil, codec.Part{Kind: codec.Start, ID: 41})
	b = enc.Append(b, codec.Part{Kind: codec.Text, ID: 42, Text: "Hi"})
	b = enc.Finish(b, 43, codec.ReasonComplete, "")
	fmt.Print(string(b))
	// Output:
	// id: 9f3c-41
	// data: {"runId":"turn-1","threadId":"s1","type":"RUN_STARTED"}
	//
	// id: 9f3c-42:0
	// data: {"messageId":"turn-1-text-42","role":"assistant","type":"TEXT_MESSAGE_START"}
	//
	// id: 9f3c-42
	// data: {"delta":"Hi","messageId":"turn-1-text-42","type":"TEXT_MESSAGE_CONTENT"}
	//
	// id: 9f3c-43:0
	// data: {"messageId":"turn-1-text-42","type":"TEXT_MESSAGE_END"}
	//
	// id: 9f3c-43
	// data: {"outcome":{"type":"success"},"runId":"turn-1","threadId":"s1","type":"RUN_FINISHED"}
}
