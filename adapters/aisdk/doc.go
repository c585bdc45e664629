// Package aisdk writes a turn as the Vercel AI SDK's UI-message stream
// (protocol v1, what npm ai 7's DefaultChatTransport and useChat read):
// SSE frames of one JSON chunk each — start, text-start / -delta / -end,
// reasoning-start / -delta / -end, tool-input-start / -delta /
// tool-input-available, tool-output-available / -error, data-*, finish,
// abort, error — and the data: [DONE] terminator, under the header
// x-vercel-ai-ui-message-stream: v1 ([SetHeaders]).
//
// An [Encoder] turns the parts of package codec into chunks, keeping what
// the client's parser requires: a text or reasoning block is opened before
// its deltas and closed before anything else is written, a tool call is
// announced before its input and output, and the stream ends once.
//
//	enc := aisdk.NewEncoder(messageID)
//	buf = enc.Start(buf)
//	for each event: buf = enc.Append(buf, codec.Default.Decode(parts[:0], ev)...)
//	buf = enc.Finish(buf, codec.ReasonComplete, "")
//
// # Routes
//
// [Handler] serves the chat routes from the bus's turns: POST {api} (the
// body DefaultChatTransport sends) hands the new user message to the
// application's [StartFunc] and streams the turn it starts; GET
// {api}/{chatId}/stream is 204 when no turn is active, else the active
// turn from its start, compacted, then live; POST {api}/{chatId}/stop
// cancels the turn through the bus (its streams end with abort). A chat
// id never seen creates its session; a refused request writes nothing.
//
//	h, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{Start: start})
//	mux.Handle("/api/chat", h)
//	mux.Handle("/api/chat/", h)
//
// # Resume
//
// The AI SDK resumes by asking for the active stream again (GET
// {api}/{chatId}/stream) and rebuilds the message from its start chunk
// (DefaultChatTransport's resumeStreamIsReplay). Encoded from the
// compacted log, the resumed stream holds the reply so far in one
// text-delta per block, then goes on live. The chunk ids of a block derive
// from its first event's id, so the replay and the live stream agree.
//
// Tool calls are written as dynamic tools (the client knows no schema for
// them); an ACP tool call's kind is its tool name and its title the
// chunk's title. Byte-exact JSON is pinned by the package's tests and
// docs/frontends.md has the mapping table. An Encoder is for one stream
// and one goroutine.
package aisdk
