package coalesce

import "sort"

// ACPRules merges the Agent Client Protocol's session/update shapes as the
// example agent server publishes them: event type = the update's
// sessionUpdate kind, data = the notification params
// {"sessionId":…,"update":{"sessionUpdate":…,…}}.
//
//   - agent_message_chunk and agent_thought_chunk whose content is text:
//     update.content.text concatenated (everything else from the first);
//   - tool_call_update per update.toolCallId and update.status: the
//     updates applied in order, as the protocol defines them — a member a
//     later update sets (content, locations, rawOutput, title, …) replaces
//     the earlier value, one it leaves out (or sets to null) keeps it; the
//     rest of the payload is the last event's;
//   - plan: the last one wins;
//   - everything else (tool_call, turn lifecycle, unknown types) passes
//     through.
var ACPRules = RuleSet{
	Name: "acp",
	Rules: []Rule{
		{Group: "delta_text", Types: []string{"agent_message_chunk"},
			When: map[string]string{"update.content.type": "text"}, Merge: Merge{Op: Concat, Path: "update.content.text"}},
		{Group: "delta_thinking", Types: []string{"agent_thought_chunk"},
			When: map[string]string{"update.content.type": "text"}, Merge: Merge{Op: Concat, Path: "update.content.text"}},
		{Group: "progress", Types: []string{"tool_call_update"},
			KeyPaths: []string{"update.toolCallId", "update.status"}, Merge: Merge{Op: Custom, Func: mergeToolCallUpdates}},
		{Group: "plan", Types: []string{"plan"}, Merge: Merge{Op: Last}},
	},
}

// AgentPool event types (their event_kind values) that AgentPoolRules
// names.
const (
	TypePartDelta        = "part_delta"
	TypeToolCallProgress = "tool_call_progress"
	TypePlanUpdate       = "plan_update"
)

// AgentPoolImmediate lists AgentPool's lifecycle event types that bypass
// coalescing (its _is_immediate): run started / error / failed, stream
// complete, spawn session start, compaction, session resume, tool call
// start / complete / deferred, elicitation deferred.
var AgentPoolImmediate = []string{
	"run_started", "run_error", "run_failed", "stream_complete", "spawn_session_start", "compaction",
	"session_resume", "tool_call_start", "tool_call_complete", "tool_call_deferred", "elicitation_deferred",
}

// AgentPoolRules merges AgentPool's event shapes (pydantic-ai's
// PartDeltaEvent with part_delta_kind text / thinking / tool_call, and
// AgentPool's ToolCallProgressEvent and PlanUpdateEvent), with the keys and
// merges of its drain_and_merge:
//
//   - part_delta text ("delta_text") and thinking ("delta_thinking"):
//     delta.content_delta concatenated, index (and all else) of the first;
//   - part_delta tool_call per delta.tool_call_id ("delta_tool_call"):
//     delta.args_delta concatenated when it is a string;
//   - tool_call_progress per tool_call_id and status ("progress"): items
//     concatenated (duplicates kept), every other field from the last;
//   - plan_update: the last one wins;
//   - a part_delta whose delta is null is dropped; one without a delta,
//     or of any other unexpected shape, passes through;
//   - AgentPoolImmediate and everything else pass through.
//
// One difference on purpose: a tool-call delta whose args_delta is an
// object passes through, where AgentPool leaves it out of the merged
// string (its text would be lost).
var AgentPoolRules = RuleSet{
	Name: "agentpool",
	Rules: []Rule{
		{Group: "delta_text", Types: []string{TypePartDelta},
			When: map[string]string{"delta.part_delta_kind": "text"}, Merge: Merge{Op: Concat, Path: "delta.content_delta"}},
		{Group: "delta_thinking", Types: []string{TypePartDelta},
			When: map[string]string{"delta.part_delta_kind": "thinking"}, Merge: Merge{Op: Concat, Path: "delta.content_delta"}},
		{Group: "delta_tool_call", Types: []string{TypePartDelta}, KeyPaths: []string{"delta.tool_call_id"},
			When: map[string]string{"delta.part_delta_kind": "tool_call"}, Merge: Merge{Op: Concat, Path: "delta.args_delta"}},
		{Group: "progress", Types: []string{TypeToolCallProgress}, KeyPaths: []string{"tool_call_id", "status"},
			Merge: Merge{Op: Append, Path: "items"}},
		{Group: "plan", Types: []string{TypePlanUpdate}, Merge: Merge{Op: Last}},
	},
	Drops:     []Drop{{Type: TypePartDelta, Path: "delta"}},
	Immediate: AgentPoolImmediate,
}

// The compiled rule sets.
var (
	// ACP is [ACPRules] compiled: the rule set for the example agent
	// server's traffic and any ACP session/update stream.
	ACP = MustCompile(ACPRules)
	// AgentPool is [AgentPoolRules] compiled.
	AgentPool = MustCompile(AgentPoolRules)
)

var byName = map[string]*Set{ACP.Name(): ACP, AgentPool.Name(): AgentPool}

// Lookup returns the built-in rule set called name ("acp" or "agentpool").
func Lookup(name string) (*Set, bool) {
	s, ok := byName[name]
	return s, ok
}

// Names returns the names Lookup knows, sorted.
func Names() []string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
