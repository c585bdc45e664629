package sse_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// bytePayloads are the byte payloads the round trips publish: line breaks,
// NUL, invalid UTF-8, bytes that read as JSON, and none.
var bytePayloads = []struct {
	ct   string
	data []byte
}{
	{"application/octet-stream", []byte{0, 1, 0xff, '\r', '\n', 0xfe}},
	{"text/plain; charset=utf-8", []byte("line one\nline two\r\n\ndata: not a field")},
	{"text/plain", []byte(`{"looks":"like JSON"}`)},
	{"image/png", nil},
}

// TestBytePayloadRoundTrip: byte payloads published into the bus reach the
// SSE client (the resume loop over sse.Client) as the same bytes with the
// same media type, in the replay and live, beside a JSON event that stays
// JSON; the wire carries them as base64 in the envelope, never raw.
func TestBytePayloadRoundTrip(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
	publishAll := func() {
		for _, p := range bytePayloads {
			_, err := b.PublishBytes("s1", "blob", p.ct, p.data)
			require.NoError(t, err)
		}
		publish(t, b, "s1", "msg", map[string]string{"a": "b"})
	}
	check := func(evs []eventbus.Event, replay bool) {
		t.Helper()
		require.Len(t, evs, len(bytePayloads)+1)
		for i, p := range bytePayloads {
			require.False(t, evs[i].IsJSON(), "%d", i)
			require.Equal(t, p.ct, evs[i].ContentType())
			require.Equal(t, string(p.data), string(evs[i].Data))
			require.Equal(t, replay, evs[i].Replay)
		}
		last := evs[len(bytePayloads)]
		require.True(t, last.IsJSON())
		require.JSONEq(t, `{"a":"b"}`, string(last.Data))
	}
	publishAll() // replayed

	st := (&sse.Client{}).Subscribe(t.Context(), srv.URL+"/session/s1/events", sse.StreamOptions{})
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
	check(read(len(bytePayloads)+1), true)
	publishAll() // live
	check(read(len(bytePayloads)+1), false)

	// On the wire: base64 in the envelope, one data: line per frame.
	raw := openRaw(t, srv.URL+"/session/s1/events", nil)
	fr, err := raw.dec.Next()
	require.NoError(t, err)
	require.NotContains(t, string(fr.Data), "line one")
	var env map[string]any
	require.NoError(t, json.Unmarshal(fr.Data, &env))
	require.Equal(t, "AAH/DQr+", env["data"])
	require.Equal(t, "application/octet-stream", env["contentType"])
	require.Equal(t, "base64", env["encoding"])
	require.False(t, strings.ContainsAny(string(fr.Data), "\r\n"))
}
