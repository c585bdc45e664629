package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The demo's transcript as the bus's snapshot provider: a page that lost
// its position (a buffer of 4, a reply of 20 chunks) gets the text so far
// and the events after it, and the whole reply in the end.
func TestTranscriptSnapshot(t *testing.T) {
	tr := NewTranscript()
	bus, err := eventbus.New(eventbus.Options{Epoch: "e", ReplayBufferSize: 4, Snapshots: tr.Snapshot})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("root", ""))
	require.NoError(t, bus.CreateSession("kid", "root"))
	ctx, cancel := context.WithCancel(context.Background())
	read, err := tr.Follow(ctx, bus, "root")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- read() }()
	defer func() { cancel(); <-done }()

	chunk := func(s, text string) uint64 {
		ev, err := bus.Publish(s, "agent_message_chunk", map[string]any{"update": map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})
		require.NoError(t, err)
		return ev.ID
	}
	want := map[string]string{}
	var last uint64
	for i := range 20 {
		s := []string{"root", "kid"}[i%2]
		text := string(rune('a' + i))
		last = chunk(s, text)
		want[s] += text
	}
	require.Eventually(t, func() bool {
		_, asOf, err := tr.Snapshot(ctx, "root")
		return err == nil && asOf == last
	}, 10*time.Second, time.Millisecond, "the transcript caught up")

	// A page of the tree that held id 3 only: its position is lost.
	sub, err := bus.Subscribe(ctx, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: &eventbus.Position{Epoch: "e", ID: 3}})
	require.NoError(t, err)
	defer sub.Close()
	ev, ok := sub.TryNext()
	require.True(t, ok)
	require.Equal(t, frame.TypeSnapshot, ev.Type)
	var d struct {
		Reason      string
		LastEventID uint64
		State       struct{ Text map[string]string }
	}
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	assert.Equal(t, frame.ReasonRingEvicted, d.Reason)
	assert.Equal(t, last, d.LastEventID)
	assert.Equal(t, want, d.State.Text)
	ev, ok = sub.TryNext()
	require.True(t, ok)
	assert.Equal(t, frame.TypeReplayComplete, ev.Type, "nothing after the snapshot: it is up to date")

	// A session outside the tree has no transcript: today's frames.
	_, _, err = tr.Snapshot(ctx, "elsewhere")
	assert.Error(t, err)
	state, _, err := tr.Snapshot(ctx, "kid")
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":{"kid":"`+want["kid"]+`"}}`, string(state))
}
