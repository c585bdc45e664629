package coalesce_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// resumeText subscribes from cursor and returns the text of the part deltas
// replayed after it.
func resumeText(t *testing.T, b *eventbus.Bus, session string, cursor uint64) string {
	t.Helper()
	sub := subscribe(t, b, session, eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
	var s strings.Builder
	for {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		ev, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err)
		if ev.Type == frame.TypeReplayComplete {
			return s.String()
		}
		if ev.Type == "part_delta" {
			s.WriteString(delta(t, ev))
		}
	}
}

// Flaw 1 of AgentPool's drain_and_merge: _rebind keeps the FIRST merged
// envelope's event_id (test_rebind_preserves_source_session_id checks the
// template's fields are kept), so a client that saw the merged frame and
// resumes from its id is replayed the rest of the run again. Ours carries
// the last id; resuming from the id AgentPool would give repeats text.
func TestRebindPreservesSourceSessionID_MergedIDIsLast(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	sub := subscribe(t, b, "s1", eventbus.SubscribeOptions{Coalesce: coalesce.AgentPool})
	first := pub(t, b, "s1", "part_delta", mustData(text(0, "hello ")))
	pub(t, b, "s1", "part_delta", mustData(text(0, "big ")))
	last := pub(t, b, "s1", "part_delta", mustData(text(0, "world")))

	got, ok := sub.TryNext()
	require.True(t, ok)
	require.Equal(t, "hello big world", delta(t, got))
	assert.Equal(t, last.ID, got.ID, "a merged event carries the LAST merged id")
	assert.Equal(t, first.ID, got.FirstID)
	assert.Equal(t, 3, got.Count)

	// The client resumes from the id it saw: nothing it holds comes again.
	assert.Empty(t, resumeText(t, b, "s1", got.ID))
	// AgentPool's id (the first) would repeat "big world": the check above
	// fails on AgentPool's behaviour.
	assert.Equal(t, "big world", resumeText(t, b, "s1", got.FirstID))
}

// Flaw 2: _merge_envelopes groups by merge key only
// (test_merge_envelopes_preserves_source_session_id keeps the first
// envelope's session), so with a descendants or all scope a parent's and a
// child's consecutive text deltas merge into one, attributed to the parent.
// Ours never merges across sessions.
func TestMergeEnvelopesPreservesSourceSessionID_NeverAcrossSessions(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("parent", ""))
	require.NoError(t, b.CreateSession("child", "parent"))
	sub := subscribe(t, b, "parent", eventbus.SubscribeOptions{Scope: scope.Descendants, Coalesce: coalesce.AgentPool})
	p := pub(t, b, "parent", "part_delta", mustData(text(0, "parent says ")))
	c1 := pub(t, b, "child", "part_delta", mustData(text(0, "child ")))
	c2 := pub(t, b, "child", "part_delta", mustData(text(0, "says")))

	// AgentPool's grouping sees one key for all three: it would merge them
	// into one event attributed to "parent".
	kp, _ := coalesce.AgentPool.Key(p)
	kc, _ := coalesce.AgentPool.Key(c1)
	require.Equal(t, kp, kc)

	got := eventbus.Coalesce(coalesce.AgentPool, []eventbus.Event{p, c1, c2})
	require.Len(t, got, 2)
	assert.Equal(t, "parent", got[0].Session)
	assert.Equal(t, "parent says ", delta(t, got[0]))
	assert.Equal(t, "child", got[1].Session)
	assert.Equal(t, "child says", delta(t, got[1]))

	// The same through a live subscription.
	a, ok := sub.TryNext()
	require.True(t, ok)
	c, ok := sub.TryNext()
	require.True(t, ok)
	assert.Equal(t, []string{"parent", "child"}, []string{a.Session, c.Session})
	assert.Equal(t, "parent says ", delta(t, a))
	assert.Equal(t, "child says", delta(t, c))
	assert.Equal(t, c2.ID, c.ID)
	assert.Equal(t, c1.ID, c.FirstID)
}
