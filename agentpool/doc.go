// Package agentpool gives producers typed values for the event shapes of
// AgentPool (https://github.com/Leoyzen/agentpool): pydantic-ai's part
// events (part_start, part_delta with a text, thinking or tool-call delta)
// and AgentPool's own (tool_call_start / _progress / _complete,
// plan_update, run_started, run_error, stream_complete) — the shapes the
// rule set coalesce.AgentPool merges and the protocol codecs (package
// codec) read.
//
// Each value serialises as AgentPool's dataclass does, "event_kind"
// included, and its event_kind is the event type on the bus:
//
//	agentpool.Publish(bus, "run-1", agentpool.TextDelta(0, "Hel"))
//
// publishes type part_delta with
// {"index":0,"delta":{"part_delta_kind":"text","content_delta":"Hel"},"event_kind":"part_delta"}.
//
// coalesce.AgentPool concatenates consecutive text, thinking and (per tool
// call id) tool-call argument deltas, appends the items of consecutive
// tool_call_progress events of one call and status, and keeps the last
// plan_update; the lifecycle events pass through. [Parse] reads a payload
// back into these types ([Other] for an event_kind it does not type).
//
// Every value here is immutable once built and safe for concurrent use.
package agentpool
