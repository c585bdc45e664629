package aisdk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// Issue 30: the resume of a 2,000-delta reply is at most 40 SSE frames.
// Encoded from the compacting replay buffer, a turn of 2,000 text deltas,
// a tool call with its result and 2,000 more deltas is the same message
// as the live stream in a handful of frames.
func TestResumeOfALongReplyIsFewFrames(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 100, ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	defer bus.Close()
	sub, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 10000})
	require.NoError(t, err)
	defer sub.Close()
	var want strings.Builder
	say := func(n int) {
		for i := range n {
			s := "w" + string(rune('a'+i%26)) + " "
			want.WriteString(s)
			_, err := acp.Publish(bus, "s1", acp.MessageChunk(s))
			require.NoError(t, err)
		}
	}
	say(2000)
	_, err = acp.Publish(bus, "s1", acp.ToolCall{ToolCallID: "c1", Title: "ls", RawInput: map[string]string{"p": "."}})
	require.NoError(t, err)
	_, err = acp.Publish(bus, "s1", acp.ToolCallUpdate{ToolCallID: "c1", Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent("a.go")}})
	require.NoError(t, err)
	say(2000)

	encode := func(evs []eventbus.Event) (text string, frames int) {
		enc := aisdk.NewEncoder("m")
		var b []byte
		for _, ev := range evs {
			b = enc.Append(b, codec.Default.Decode(nil, ev)...)
		}
		b = enc.Finish(b, codec.ReasonComplete, "")
		var sb strings.Builder
		for _, c := range chunks(t, b) {
			if i := strings.Index(c, `"delta":"`); i >= 0 && strings.Contains(c, `"text-delta"`) {
				sb.WriteString(strings.TrimSuffix(c[i+len(`"delta":"`):], `"}`))
			}
		}
		return sb.String(), strings.Count(string(b), "\n\n")
	}
	var live []eventbus.Event
	for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
		live = append(live, ev)
	}
	require.Len(t, live, 4002)

	resume, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
	require.NoError(t, err)
	defer resume.Close()
	var compacted []eventbus.Event
	for ev, ok := resume.TryNext(); ok && ev.ID != 0; ev, ok = resume.TryNext() {
		compacted = append(compacted, ev)
	}

	liveText, liveFrames := encode(live)
	text, frames := encode(compacted)
	assert.Equal(t, want.String(), liveText)
	assert.Equal(t, want.String(), text)
	assert.Greater(t, liveFrames, 4000)
	assert.LessOrEqual(t, frames, 40, "the resume")
	t.Logf("live: %d frames; resumed from the compacted log: %d frames", liveFrames, frames)
}
