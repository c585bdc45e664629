// Package demo simulates agent runs on a replaybus [eventbus.Bus], so that
// the agentserver page has real-looking traffic to show the moment it opens.
//
// A run is one prompt turn of a parent agent that splits its task between
// two sub-agents, each in a child session of its own. Every event has the
// shape of an Agent Client Protocol session/update notification's params —
// {"sessionId": …, "update": {"sessionUpdate": <type>, …}} — and is
// published with the sessionUpdate value as its event type:
//
//   - agent_message_chunk and agent_thought_chunk: text deltas, one token at a
//     time at [Options.TokensPerSecond];
//   - tool_call (status pending) followed by tool_call_update (in_progress,
//     then completed with its result content);
//   - plan: the full list of plan entries with their statuses, re-sent on
//     every change;
//   - user_message_chunk: the parent's prompt, at the start of its turn;
//   - turn_start and turn_end: each agent's turn, written by the bus's turn
//     API (eventbus.Bus.StartTurn, eventbus.Turn.End): {"turn", "session"}
//     and {"turn", "reason"}.
//
// Every event of an agent is published in its turn (eventbus.Turn.Publish)
// and its pace follows the turn's context, so a cancel stops it at once
// and nothing of the turn follows its turn_end: a cancel of the parent's
// turn (the page's Stop button) stops the run and its sub-agents, whose
// turns run under the parent turn's context; a cancel of a sub-agent's
// turn stops that sub-agent alone (its spawn tool call fails, the parent
// goes on). Each agent sets its status as it goes — thinking, streaming,
// waiting (the parent, for its sub-agents) — which presence frames carry.
//
// At the end of a run, or when it was stopped, the child sessions are
// closed (each publishes session_closed), and the next run creates new
// ones.
package demo
