// Package agent is the example server's simulated model: the reply to a
// message (POST /session/{id}/messages) as a turn of the session, in the
// shapes of the Agent Client Protocol's session/update notifications
// (package acp), deterministic for the message's text — in a session, the
// same text publishes the same events, byte for byte.
//
// [Plan] makes the reply: "stream N" (1 ≤ N ≤ 100,000) is exactly N
// agent_message_chunk text deltas followed by one tool call (tool_call,
// then tool_call_update completed with its result); any other text is a
// user_message_chunk echoing it, a thought (agent_thought_chunk deltas), a
// search tool call with its result and an answer (agent_message_chunk
// deltas), all drawn from the text's hash. [Reply.Run] publishes it in a
// turn (eventbus.Turn.Publish) at a rate of deltas per second, sets the
// agent status (thinking, streaming; the bus sets idle at the turn's end),
// stops the moment the turn's context ends — a cancel from any route —
// and ends the turn when the reply is out.
package agent
