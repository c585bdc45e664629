package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// TestBytePayloadTwoNodes: a byte payload published on one node reaches a
// live subscriber on the other, and the other node's replay, as the same
// bytes with the same media type; a JSON event beside it stays JSON. The
// publishing node's own feed gives it back the same way.
func TestBytePayloadTwoNodes(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	syncNode(t, b.bus)
	live, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	t.Cleanup(live.Close)

	payloads := []struct {
		ct   string
		data []byte
	}{
		{"application/octet-stream", []byte{0, 1, 0xff, '\r', '\n'}},
		{"text/plain; charset=utf-8", []byte(`{"not":"json to the bus"}`)},
		{"image/png", nil},
	}
	var ids []uint64
	for _, p := range payloads {
		ev, err := a.bus.PublishBytes("s", "blob", p.ct, p.data, eventbus.WithOrigin("tab"))
		require.NoError(t, err)
		require.Equal(t, p.ct, ev.ContentType())
		ids = append(ids, ev.ID)
	}
	_, err = a.bus.Publish("s", "msg", map[string]int{"n": 1})
	require.NoError(t, err)

	check := func(evs []eventbus.Event) {
		t.Helper()
		for i, p := range payloads {
			require.Equal(t, ids[i], evs[i].ID)
			require.False(t, evs[i].IsJSON())
			require.Equal(t, p.ct, evs[i].ContentType())
			require.Equal(t, string(p.data), string(evs[i].Data))
			require.Equal(t, "tab", evs[i].Origin)
		}
		require.True(t, evs[len(payloads)].IsJSON())
		require.JSONEq(t, `{"n":1}`, string(evs[len(payloads)].Data))
	}
	var got []eventbus.Event
	for range len(payloads) + 1 {
		got = append(got, next(t, live))
	}
	check(got)
	for _, n := range []*node{a, b} {
		syncNode(t, n.bus)
		replay, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
		require.NoError(t, err)
		got = got[:0]
		for range len(payloads) + 1 {
			got = append(got, next(t, replay))
		}
		replay.Close()
		check(got)
	}
}
