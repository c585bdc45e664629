package ws_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// TestBytePayloadRoundTrip: byte payloads published into the bus reach the
// WebSocket client (the resume loop over ws.Client) as the same bytes with
// the same media type, in the replay and live, beside a JSON event that
// stays JSON; a frame is the text envelope with the bytes in base64.
func TestBytePayloadRoundTrip(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	payloads := []struct {
		ct   string
		data []byte
	}{
		{"application/octet-stream", []byte{0, 1, 0xff, '\r', '\n', 0xfe}},
		{"text/plain; charset=utf-8", []byte("line one\nline two")},
		{"text/plain", []byte(`{"looks":"like JSON"}`)},
		{"image/png", nil},
	}
	publishAll := func() {
		for _, p := range payloads {
			_, err := s.bus.PublishBytes("s1", "blob", p.ct, p.data)
			require.NoError(t, err)
		}
		_, err := s.bus.Publish("s1", "msg", map[string]string{"a": "b"})
		require.NoError(t, err)
	}
	check := func(evs []eventbus.Event, replay bool) {
		t.Helper()
		require.Len(t, evs, len(payloads)+1)
		for i, p := range payloads {
			require.False(t, evs[i].IsJSON(), "%d", i)
			require.Equal(t, p.ct, evs[i].ContentType())
			require.Equal(t, string(p.data), string(evs[i].Data))
			require.Equal(t, replay, evs[i].Replay)
		}
		require.True(t, evs[len(payloads)].IsJSON())
		require.JSONEq(t, `{"a":"b"}`, string(evs[len(payloads)].Data))
	}
	publishAll() // replayed
	st := (&ws.Client{}).Subscribe(context.Background(), s.url("s1", ""), ws.StreamOptions{})
	defer st.Close()
	read := func(n int) []eventbus.Event {
		var out []eventbus.Event
		for len(out) < n {
			ev, err := st.Next()
			require.NoError(t, err)
			if ev.ID != 0 {
				out = append(out, ev)
			}
		}
		return out
	}
	check(read(len(payloads)+1), true)
	publishAll() // live
	check(read(len(payloads)+1), false)

	// A raw connection: the first frame is the envelope with base64 data.
	c := dial(t, s.url("s1", ""))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, b, err := c.Read(ctx)
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(b, &env), "%s", b)
	require.Equal(t, "AAH/DQr+", env["data"])
	require.Equal(t, "application/octet-stream", env["contentType"])
	require.Equal(t, "base64", env["encoding"])
}
