package acp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// event is what a subscriber would get for u published to s1 as id.
func event(t *testing.T, id uint64, u acp.Update) eventbus.Event {
	t.Helper()
	b, err := json.Marshal(acp.Notification{SessionID: "s1", Update: u})
	require.NoError(t, err)
	return eventbus.Event{ID: id, Session: "s1", Type: u.Type(), Data: b}
}

// Issue 27.10: the README published {"text": …}, which coalesce.ACP does
// not recognise. Every helper whose kind the rule set merges gets a merge
// key; a tool_call (and anything else) passes through.
func TestACPRulesRecogniseEveryHelper(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name  string
		u     acp.Update
		merge bool
	}{
		{"message chunk", acp.MessageChunk("a"), true},
		{"thought chunk", acp.ThoughtChunk("a"), true},
		{"tool call update", acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusInProgress}, true},
		{"plan", acp.Plan{Entries: []acp.PlanEntry{{Content: "x", Priority: "low", Status: "pending"}}}, true},
		{"tool call", acp.ToolCall{ToolCallID: "t1", Title: "x"}, false},
		{"user chunk", acp.UserMessageChunk("a"), false},
	}
	for _, r := range rows {
		key, drop := coalesce.ACP.Key(event(t, 1, r.u))
		assert.False(t, drop, r.name)
		assert.Equal(t, r.merge, key != "", "%s: key %q", r.name, key)
	}
	var legacy = eventbus.Event{ID: 1, Session: "s1", Type: acp.TypeMessageChunk, Data: json.RawMessage(`{"text":"Hel"}`)}
	key, _ := coalesce.ACP.Key(legacy)
	assert.Empty(t, key, "the old Quick start's shape is not recognised: the reason for the helpers")
}

// Consecutive helpers merge as the rule set says: text concatenated,
// tool-call updates applied in order per call and status (the last
// content replaces the earlier), the last plan kept.
func TestACPRulesMergeHelpers(t *testing.T) {
	t.Parallel()
	plan := func(s string) acp.Plan {
		return acp.Plan{Entries: []acp.PlanEntry{{Content: "x", Priority: "low", Status: s}}}
	}
	batch := []eventbus.Event{
		event(t, 1, acp.MessageChunk("Hel")), event(t, 2, acp.MessageChunk("lo")),
		event(t, 3, acp.ThoughtChunk("a")), event(t, 4, acp.ThoughtChunk("b")),
		event(t, 5, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TextContent("1")}}),
		event(t, 6, acp.ToolCallUpdate{ToolCallID: "t1", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TextContent("2")}}),
		event(t, 7, plan("pending")), event(t, 8, plan("completed")),
	}
	out := eventbus.Coalesce(coalesce.ACP, batch)
	require.Len(t, out, 4)
	parse := func(ev eventbus.Event) acp.Update {
		n, err := acp.Parse(ev.Data)
		require.NoError(t, err)
		return n.Update
	}
	assert.Equal(t, "Hello", parse(out[0]).(acp.ContentChunk).Content.Text)
	assert.Equal(t, 2, out[0].Count)
	assert.Equal(t, "ab", parse(out[1]).(acp.ContentChunk).Content.Text)
	assert.Equal(t, []acp.ToolCallContent{acp.TextContent("2")}, parse(out[2]).(acp.ToolCallUpdate).Content)
	assert.Equal(t, "completed", parse(out[3]).(acp.Plan).Entries[0].Status)
	assert.EqualValues(t, 8, out[3].ID)
}

// A compacting bus (REPLAY_COMPACT=acp) keeps a reply published with the
// helpers as one record, and a resume inside it gets exactly the rest.
func TestCompactionFoldsAHelperReply(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10, ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	defer bus.Close()
	for _, s := range []string{"Hel", "lo, ", "wor", "ld"} {
		_, err := acp.Publish(bus, "s1", acp.MessageChunk(s))
		require.NoError(t, err)
	}
	_, err = acp.Publish(bus, "s1", acp.ToolCall{ToolCallID: "t1", Title: "ls"})
	require.NoError(t, err)

	read := func(cursor uint64) []eventbus.Event {
		sub, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
		require.NoError(t, err)
		defer sub.Close()
		var out []eventbus.Event
		for {
			ev, ok := sub.TryNext()
			require.True(t, ok, "the replay ends with replay_complete")
			if ev.ID == 0 {
				return out
			}
			out = append(out, ev)
		}
	}
	all := read(0)
	require.Len(t, all, 2, "one record for the reply, one for the tool call")
	n, err := acp.Parse(all[0].Data)
	require.NoError(t, err)
	assert.Equal(t, "Hello, world", n.Update.(acp.ContentChunk).Content.Text)
	assert.Equal(t, 4, all[0].Count)

	rest := read(2)
	require.Len(t, rest, 2)
	n, err = acp.Parse(rest[0].Data)
	require.NoError(t, err)
	assert.Equal(t, "world", n.Update.(acp.ContentChunk).Content.Text, "the suffix after id 2")
	assert.EqualValues(t, 3, rest[0].FirstID)
}
