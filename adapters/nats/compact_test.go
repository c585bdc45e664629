package nats_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// chunkText returns the text of an ACP agent_message_chunk.
func chunkText(t testing.TB, ev eventbus.Event) string {
	t.Helper()
	var v struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &v), "%s", ev.Data)
	return v.Update.Content.Text
}

// TestCompactResumeOnAnotherNode: a 2,000-delta reply published on node A
// into compacting rings of 100 (the stream keeps the raw events); a client
// of node A cut after delta 50 resumes on node B and gets the same suffix,
// as one record, that node A gives: exactly the rest of the text, no
// ring_evicted.
func TestCompactResumeOnAnotherNode(t *testing.T) {
	const n, cut = 2000, 50
	cfg := eventbus.Options{ReplayCompact: coalesce.ACP}
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, shared.ClientURL(), cfg, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	live, err := a.bus.Subscribe(ctx, "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	var want, got strings.Builder
	pub := func(i int) {
		tok := "t" + strconv.Itoa(i) + " "
		data, _ := json.Marshal(map[string]any{"update": map[string]any{"sessionUpdate": "agent_message_chunk",
			"content": map[string]any{"type": "text", "text": tok}}})
		_, err := a.bus.PublishJSON("s", "agent_message_chunk", data)
		require.NoError(t, err)
		want.WriteString(tok)
	}
	for i := range cut {
		pub(i)
	}
	var cursor uint64
	for range cut {
		ev := next(t, live)
		got.WriteString(chunkText(t, ev))
		cursor = ev.ID
	}
	cancel()
	for i := cut; i < n; i++ {
		pub(i)
	}
	syncNode(t, a.bus)
	syncNode(t, b.bus)
	suffix := func(bus *eventbus.Bus) eventbus.Event {
		s, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: bus.Epoch(), ID: cursor}})
		require.NoError(t, err)
		defer s.Close()
		first := next(t, s)
		assert.NotEqual(t, frame.TypeStateResyncRequired, first.Type, "no ring_evicted")
		assert.Equal(t, frame.TypeReplayComplete, next(t, s).Type, "the rest is one record")
		return first
	}
	onA, onB := suffix(a.bus), suffix(b.bus)
	assert.Equal(t, n-cut, onB.Count)
	assert.Equal(t, cursor+1, onB.FirstID)
	assert.Equal(t, onA.ID, onB.ID)
	assert.Equal(t, onA.Count, onB.Count)
	assert.Equal(t, onA.FirstID, onB.FirstID)
	assert.JSONEq(t, string(onA.Data), string(onB.Data), "the same suffix on either node")
	got.WriteString(chunkText(t, onB))
	assert.Equal(t, want.String(), got.String())
}

// TestStreamLimitsFollowReplayWindow: the stream keeps NATSRetention
// windows of the replay window: per subject ReplayBufferSize ×
// NATSRetention events, and ReplayMaxAge × NATSRetention of age unless
// NATSMaxAge is set. ReplayMaxBytes binds each node's buffers, not the
// stream (JetStream has no per-subject byte bound), and a node's buffer
// evicts and announces by bytes as in memory.
func TestStreamLimitsFollowReplayWindow(t *testing.T) {
	cfg := eventbus.Options{ReplayBufferSize: 10, NATSRetention: 3, ReplayMaxAge: time.Minute, ReplayMaxBytes: 21}
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	js, err := jetstream.New(a.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), a.be.Stream())
	require.NoError(t, err)
	info := st.CachedInfo().Config
	assert.Equal(t, int64(30), info.MaxMsgsPerSubject)
	assert.Equal(t, 3*time.Minute, info.MaxAge)
	assert.Equal(t, int64(-1), info.MaxBytes, "no stream-wide byte bound")

	var ids []uint64
	for i := range 8 {
		ev, err := a.bus.Publish("s", "msg", map[string]int{"n": i}) // 7 bytes each
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	syncNode(t, a.bus)
	s, err := a.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: a.bus.Epoch(), ID: ids[0]}})
	require.NoError(t, err)
	defer s.Close()
	first := next(t, s)
	require.Equal(t, frame.TypeStateResyncRequired, first.Type)
	var d frame.ResyncData
	require.NoError(t, json.Unmarshal(first.Data, &d))
	assert.Equal(t, frame.ReasonRingEvicted, d.Reason)
	assert.Equal(t, ids[5], d.CompleteFromID, "three 7-byte events fit 21 bytes")
	got, _ := readIDs(t, s, 3)
	assert.Equal(t, ids[5:], got)

	t.Run("NATSMaxAge wins", func(t *testing.T) {
		cfg := cfg
		cfg.NATSMaxAge = time.Hour
		b := newNode(t, shared.ClientURL(), cfg, uniqueStream()...)
		st, err := js.Stream(context.Background(), b.be.Stream())
		require.NoError(t, err)
		assert.Equal(t, time.Hour, st.CachedInfo().Config.MaxAge)
	})
}
