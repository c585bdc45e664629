package testkit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// BytePayload is one byte payload the round-trip tests publish.
type BytePayload struct {
	ContentType string // canonical, as Event.ContentType returns it
	Data        []byte
}

// BytePayloads are the byte payloads every path's round trip publishes:
// NUL, invalid UTF-8 and raw line breaks, text whose lines look like SSE
// fields, bytes that read as JSON, and none.
var BytePayloads = []BytePayload{
	{"application/octet-stream", []byte{0, 1, 0xff, '\r', '\n', 0xfe}},
	{"text/plain; charset=utf-8", []byte("line one\nline two\r\n\ndata: not a field")},
	{"text/plain", []byte(`{"looks":"like JSON"}`)},
	{"image/png", nil},
}

// PublishBytePayloads publishes [BytePayloads] to session with
// Bus.PublishBytes (type "blob", origin "tab"), then one JSON event
// {"a":"b"} of type "msg", and returns the ids of all of them.
func PublishBytePayloads(t testing.TB, b *eventbus.Bus, session string) []uint64 {
	t.Helper()
	var ids []uint64
	for _, p := range BytePayloads {
		ev, err := b.PublishBytes(session, "blob", p.ContentType, p.Data, eventbus.WithOrigin("tab"))
		require.NoError(t, err)
		require.Equal(t, p.ContentType, ev.ContentType())
		ids = append(ids, ev.ID)
	}
	ev, err := b.Publish(session, "msg", map[string]string{"a": "b"})
	require.NoError(t, err)
	return append(ids, ev.ID)
}

// CheckBytePayloads fails unless evs are what [PublishBytePayloads]
// published, with ids ids: the same bytes, media types and origin, the
// JSON event still JSON, each with Replay as replay.
func CheckBytePayloads(t testing.TB, evs []eventbus.Event, ids []uint64, replay bool) {
	t.Helper()
	require.Len(t, evs, len(BytePayloads)+1)
	for i, p := range BytePayloads {
		require.Equal(t, ids[i], evs[i].ID)
		require.False(t, evs[i].IsJSON(), "%d", i)
		require.Equal(t, p.ContentType, evs[i].ContentType())
		require.Equal(t, string(p.Data), string(evs[i].Data))
		require.Equal(t, "tab", evs[i].Origin)
		require.Equal(t, replay, evs[i].Replay)
	}
	last := evs[len(BytePayloads)]
	require.Equal(t, ids[len(BytePayloads)], last.ID)
	require.True(t, last.IsJSON())
	require.JSONEq(t, `{"a":"b"}`, string(last.Data))
	require.Equal(t, replay, last.Replay)
}

// ReadEvents calls next until it has returned n published events (id ≠ 0)
// and returns them; synthetic frames are skipped. It fails the test at
// the first error.
func ReadEvents(t testing.TB, next func() (eventbus.Event, error), n int) []eventbus.Event {
	t.Helper()
	var out []eventbus.Event
	for len(out) < n {
		ev, err := next()
		require.NoError(t, err)
		if ev.ID != 0 {
			out = append(out, ev)
		}
	}
	return out
}
