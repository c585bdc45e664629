package sse

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/internal/framecache"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// The frame cache returns the one encoding of an event to every stream, and
// never a frame built from anything else: another Data slice with the same
// id (a coalesced event), another Count, Replay or event: variant.
func TestFrameCacheSharesOnlyIdenticalFrames(t *testing.T) {
	var c frameCache
	data := json.RawMessage(`{"text":"a"}`)
	ev := eventbus.Event{ID: 7, Session: "s", Type: "agent_message_chunk", Data: data}
	opts := EncodeOptions{}

	first, _ := c.frame(ev, opts, nil) // encodes and fills the slot
	a, _ := c.frame(ev, opts, nil)
	b, _ := c.frame(ev, opts, nil)
	require.Equal(t, string(AppendEvent(nil, ev, opts)), string(first))
	require.Equal(t, string(first), string(a))
	require.Same(t, &a[0], &b[0], "later streams get the same encoded bytes")

	for name, other := range map[string]eventbus.Event{
		"other data, same id (coalesced)": {ID: 7, Session: "s", Type: "agent_message_chunk", Data: json.RawMessage(`{"text":"ab"}`), Count: 2, FirstID: 6},
		"same data, replayed":             {ID: 7, Session: "s", Type: "agent_message_chunk", Data: data, Replay: true},
		"equal data in another slice":     {ID: 7, Session: "s", Type: "agent_message_chunk", Data: json.RawMessage(`{"text":"b"}`)},
	} {
		got, _ := c.frame(other, opts, nil)
		require.Equal(t, string(AppendEvent(nil, other, opts)), string(got), name)
	}
	msg, _ := c.frame(ev, EncodeOptions{NoEventField: true}, nil)
	require.Equal(t, string(AppendEvent(nil, ev, EncodeOptions{NoEventField: true})), string(msg))
	again, _ := c.frame(ev, opts, nil)
	require.Equal(t, string(AppendEvent(nil, ev, opts)), string(again), "after the others, the original still encodes right")

	// Synthetic frames and over-long frames are built in scratch, not cached.
	syn := eventbus.Event{Session: "s", Type: frame.TypeReplayComplete, Data: json.RawMessage(`{}`)}
	f, scratch := c.frame(syn, opts, make([]byte, 0, 64))
	require.Equal(t, string(AppendEvent(nil, syn, opts)), string(f))
	require.Same(t, &f[0], &scratch[0])
	big := eventbus.Event{ID: 9, Session: "s", Type: "t"}
	big.Data = json.RawMessage(`"` + string(repeat('x', framecache.Max)) + `"`)
	bf, _ := c.frame(big, opts, nil)
	require.Equal(t, string(AppendEvent(nil, big, opts)), string(bf))
	c.c.Each(func(b []byte) {
		require.LessOrEqual(t, len(b), framecache.Max, "the cache holds an over-long frame")
	})
}

func repeat(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}
