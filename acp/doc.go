// Package acp gives producers typed values for the Agent Client Protocol's
// session/update notifications (https://agentclientprotocol.com), the
// shapes that the coalescing and compaction rule set coalesce.ACP and the
// protocol codecs (package codec) understand.
//
// A session/update notification's params are {"sessionId", "update"}, and
// the update's "sessionUpdate" member says which kind it is. On the bus the
// kind is the event type and the params are the payload:
//
//	acp.Publish(bus, "run-1", acp.MessageChunk("Hel"))
//
// publishes type agent_message_chunk with
// {"sessionId":"run-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}.
//
// # Updates
//
// [ContentChunk] (agent_message_chunk, agent_thought_chunk,
// user_message_chunk: [MessageChunk], [ThoughtChunk], [UserMessageChunk]),
// [ToolCall] (tool_call), [ToolCallUpdate] (tool_call_update) and [Plan]
// (plan) implement [Update]; [Parse] reads a payload back into them, and
// any other kind into [Other], so that nothing is lost. Field names and
// JSON follow the protocol's schema (version 1): camelCase members,
// optional ones left out when empty.
//
// # Coalescing
//
// coalesce.ACP merges consecutive text chunks (their content.text) and the
// tool_call_update events of one tool call and status (their content
// arrays); a compacting bus (AGENTPOOL_EVENTBUS_REPLAY_COMPACT=acp) keeps a
// streamed reply as one record. Both need these exact shapes: a payload
// such as {"text": "Hel"} passes through unmerged.
//
// Every value here is immutable once built and safe for concurrent use.
package acp
