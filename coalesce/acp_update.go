package coalesce

import (
	"encoding/json"
	"fmt"

	"github.com/replaybus/replaybus/eventbus"
)

// mergeToolCallUpdates merges a run of ACP tool_call_update events of one
// tool call and status as a client applies them: every member of a later
// update that is set (present and not null) replaces the earlier one —
// content and locations included, whose schema text is "Replace the
// content collection" — and a member a later update leaves out keeps the
// earlier value. The envelope around update (sessionId, _meta) is the
// last event's. An event that is not an object with an update object is
// an error, which delivers the run unmerged.
func mergeToolCallUpdates(evs []eventbus.Event) (json.RawMessage, error) {
	var env map[string]json.RawMessage
	update := map[string]json.RawMessage{}
	for _, ev := range evs {
		env = nil
		if err := json.Unmarshal(ev.Data, &env); err != nil || env == nil {
			return nil, fmt.Errorf("coalesce: acp: event %d: not a JSON object", ev.ID)
		}
		var u map[string]json.RawMessage
		if err := json.Unmarshal(env["update"], &u); err != nil || u == nil {
			return nil, fmt.Errorf("coalesce: acp: event %d: update is not an object", ev.ID)
		}
		for k, v := range u {
			if _, had := update[k]; !had || !isNull(v) {
				update[k] = v
			}
		}
	}
	merged, err := json.Marshal(update)
	if err != nil {
		return nil, err
	}
	env["update"] = merged
	return json.Marshal(env)
}
