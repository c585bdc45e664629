// Package a2a writes a turn as an A2A task (the Agent2Agent protocol,
// https://a2a-protocol.org) streamed over JSON-RPC and SSE, as npm
// @a2a-js/sdk 1.3.0's client parses it: for protocol 1.0 the results of
// SendStreamingMessage and SubscribeToTask ({"task"}, {"statusUpdate"},
// {"artifactUpdate"}), for protocol 0.3 those of message/stream and
// tasks/resubscribe (kind task, status-update with its final flag,
// artifact-update). [Card] is the agent card that announces both.
//
// An [Encoder] turns the parts of package codec into the task's updates:
// the task is submitted, works while parts arrive, and ends completed,
// canceled or failed by the turn's end reason. The reply's text and
// reasoning, each tool call and the plan are artifacts; text is appended
// chunk by chunk (append true after the first), the plan replaced.
// [Encoder.Task] writes the task as it stands — status and every artifact
// so far, text merged — which is what a resubscribe sends first; priming
// an encoder with the compacted log (Skip(-1)) gives it in one frame, and
// the live updates follow.
//
// Frame ids follow package agui's rule ("<epoch>-<N>:k" inside the frames
// of event N, "<epoch>-<N>" for its last), an extension of A2A's stream:
// a client that sends one back as Last-Event-ID resumes exactly.
// [Handler] serves the streaming methods of both versions from the bus's
// turns (a message starts a turn through the application's [StartFunc];
// a resubscribe sends the task first, then live updates), and
// [CardHandler] the agent card.
// [ParseRequest] reads the JSON-RPC requests of both versions,
// [AppendError] writes a JSON-RPC error. docs/frontends.md has the
// mapping table. An Encoder is for one stream and one goroutine.
package a2a
