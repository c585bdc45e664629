// Package coalesce holds the rule sets of subscriber-side coalescing: which
// consecutive events a subscriber merges into one and how. It ports
// AgentPool's drain_and_merge (Leoyzen/agentpool, orchestrator/event_bus.py:
// _merge_key, _merge_text_deltas, _merge_tool_call_deltas,
// _merge_progress_events, _merge_envelopes) with its rules as values
// instead of code paths, and fixes its two flaws.
//
// Turn it on per subscription with one option:
//
//	sub, err := bus.Subscribe(ctx, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.ACP})
//
// (over SSE: ?coalesce=acp, optionally &throttle=150ms). Each time the
// consumer takes a frame it takes everything already queued and merges
// consecutive events with the same key: 500 queued two-letter text chunks
// arrive as one chunk holding the 1,000 letters.
//
// # Rule sets
//
// [ACP] merges the Agent Client Protocol's session/update shapes (text and
// thought chunks, tool_call_update per tool call and status, plan);
// [AgentPool] merges AgentPool's shapes (pydantic-ai part deltas, tool call
// progress, plan update) and passes its immediate lifecycle events through.
// Both are compiled from plain [RuleSet] values ([ACPRules],
// [AgentPoolRules]); copy one, add [Rule]s with your own types, conditions,
// key paths and merge operations (or a Key and Merge function), and
// [Compile] it.
//
// # Ids
//
// A merged event carries the LAST merged event's id, so a client that
// resumes from it is never replayed what it already holds (AgentPool keeps
// the first id: resuming from it replays the rest of the run again), plus
// Count (how many events it holds) and FirstID. Nothing merges across
// sessions (AgentPool merges a parent's and a child's consecutive deltas
// into one under a descendants scope), event types, origins, replay and
// live, a synthetic frame (resync, replay_complete, warnings) or
// session_closed; an announced gap is such a frame, so nothing merges
// across it either.
//
// # Throttle
//
// eventbus.SubscribeOptions.Throttle adds OpenClaw's chat-delta throttle:
// a mergeable live event is held until a window after the previous one was
// handed out, merging what follows; any other event hands out the held one
// first, so order is kept, and the subscription's end (close, eviction,
// context) hands it out too. Only a consumer that holds something waits on
// a timer; no goroutine is started.
//
// A [Set] is immutable and safe for concurrent use.
package coalesce
