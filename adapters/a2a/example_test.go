package a2a_test

import (
	"fmt"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/codec"
)

// A task streamed for a 0.3 message/stream request: the task, then its
// updates, the last one final.
func ExampleEncoder() {
	req, _ := a2a.ParseRequest([]byte(`{"jsonrpc":"2.0","id":5,"method":"message/stream",
		"params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`))
	enc := a2a.NewEncoder(a2a.Options{Version: req.Version, RequestID: req.ID, TaskID: "turn-1", ContextID: "s1"})
	b := enc.Task(nil, 0)
	b = enc.Append(b, codec.Part{Kind: codec.Text, ID: 8, Text: "Hello"})
	b = enc.Finish(b, 9, codec.ReasonComplete, "")
	fmt.Print(string(b))
	// Output:
	// data: {"jsonrpc":"2.0","id":5,"result":{"contextId":"s1","id":"turn-1","kind":"task","status":{"state":"submitted"}}}
	//
	// id: 8:0
	// data: {"jsonrpc":"2.0","id":5,"result":{"contextId":"s1","final":false,"kind":"status-update","status":{"state":"working"},"taskId":"turn-1"}}
	//
	// id: 8
	// data: {"jsonrpc":"2.0","id":5,"result":{"append":false,"artifact":{"artifactId":"text-8","name":"text","parts":[{"kind":"text","text":"Hello"}]},"contextId":"s1","kind":"artifact-update","lastChunk":false,"taskId":"turn-1"}}
	//
	// id: 9
	// data: {"jsonrpc":"2.0","id":5,"result":{"contextId":"s1","final":true,"kind":"status-update","status":{"state":"completed"},"taskId":"turn-1"}}
}
