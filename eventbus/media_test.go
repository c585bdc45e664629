package eventbus_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Byte payloads (Bus.PublishBytes): a payload that is not JSON, carried
// with its media type through the replay buffer, replay, compaction and
// coalescing; JSON stays the default and is validated once at publish.

// PublishBytes's validation, as a spec: what it refuses (ErrInvalid with
// the bad value named) and what it accepts, with the media type and
// payload form the event gets.
func TestPublishBytesValidation(t *testing.T) {
	long := "application/x-" + strings.Repeat("a", 250)
	cases := []struct {
		name, typ, contentType string
		data                   []byte
		wantErr                string // a substring naming the bad value; "" accepts
		wantType               string // ContentType of the stored event
		wantJSON               bool
	}{
		{name: "octet stream", typ: "blob", contentType: "application/octet-stream", data: []byte{0, 1, 0xff, '\n'}, wantType: "application/octet-stream"},
		{name: "text with charset", typ: "blob", contentType: "text/plain; charset=utf-8", data: []byte("hi\r\n"), wantType: "text/plain; charset=utf-8"},
		{name: "canonical form", typ: "blob", contentType: "Text/Plain;Charset=UTF-8", data: []byte("hi"), wantType: "text/plain; charset=UTF-8"},
		{name: "empty payload", typ: "blob", contentType: "image/png", wantType: "image/png"},
		{name: "structured suffix is bytes", typ: "blob", contentType: "application/ld+json", data: []byte("not json"), wantType: "application/ld+json"},
		{name: "JSON claimed and valid", typ: "blob", contentType: "application/json", data: []byte(`{"a":1}`), wantType: "application/json", wantJSON: true},
		{name: "JSON with parameters", typ: "blob", contentType: "Application/JSON; charset=utf-8", data: []byte(`[1]`), wantType: "application/json", wantJSON: true},
		{name: "JSON without payload", typ: "blob", contentType: "application/json", wantType: "application/json", wantJSON: true},
		{name: "empty media type", typ: "blob", contentType: "", data: []byte("x"), wantErr: `media type "" is empty`},
		{name: "blank media type", typ: "blob", contentType: "  ", data: []byte("x"), wantErr: `media type "  " is empty`},
		{name: "no subtype", typ: "blob", contentType: "text", data: []byte("x"), wantErr: `malformed media type "text"`},
		{name: "empty subtype", typ: "blob", contentType: "text/", data: []byte("x"), wantErr: `malformed media type "text/"`},
		{name: "wildcard", typ: "blob", contentType: "image/*", data: []byte("x"), wantErr: `malformed media type "image/*"`},
		{name: "bad parameter", typ: "blob", contentType: "text/plain; charset", data: []byte("x"), wantErr: `malformed media type "text/plain; charset"`},
		{name: "space inside", typ: "blob", contentType: "text /plain", data: []byte("x"), wantErr: `malformed media type "text /plain"`},
		{name: "too long", typ: "blob", contentType: long, data: []byte("x"), wantErr: "is 264 bytes long (at most 255)"},
		{name: "JSON claimed but invalid", typ: "blob", contentType: "application/json", data: []byte("{oops"), wantErr: `data is not valid JSON (media type "application/json"): "{oops"`},
		{name: "JSON claimed but not UTF-8", typ: "blob", contentType: "application/json", data: []byte("[\"ok\",\"\xc3\x28\"]"), wantErr: `data is not valid JSON (media type "application/json"): not UTF-8 at byte 7 (0xc3): "[\"ok\",\"\xc3(\"]"`},
		{name: "not UTF-8 as bytes", typ: "blob", contentType: "text/plain", data: []byte("\xc3\x28"), wantType: "text/plain"},
		{name: "reserved type", typ: frame.TypeSessionClosed, contentType: "text/plain", data: []byte("x"), wantErr: `event type "session_closed" is reserved`},
		{name: "empty type", typ: "", contentType: "text/plain", data: []byte("x"), wantErr: "event type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBus(t, eventbus.Options{})
			ev, err := b.PublishBytes("s", tc.typ, tc.contentType, tc.data)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, eventbus.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				require.Zero(t, b.LastEventID(), "a refused event consumes no id")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantType, ev.ContentType())
			require.Equal(t, tc.wantJSON, ev.IsJSON())
			if len(tc.data) == 0 {
				require.Empty(t, ev.Data)
			} else {
				require.Equal(t, tc.data, []byte(ev.Data))
			}
			got := next(t, subscribe(t, b, "s", eventbus.SubscribeOptions{}))
			require.Equal(t, ev.ID, got.ID)
			require.Equal(t, tc.wantType, got.ContentType())
			require.Equal(t, tc.wantJSON, got.IsJSON())
		})
	}
}

// JSON is the default: events of Publish and PublishJSON, synthetic frames
// and the zero Event are JSON; Event stays 128 bytes (a size class).
func TestJSONIsTheDefault(t *testing.T) {
	require.EqualValues(t, 128, unsafe.Sizeof(eventbus.Event{}))
	require.True(t, eventbus.Event{}.IsJSON())
	require.Equal(t, "application/json", eventbus.Event{}.ContentType())
	b := newBus(t, eventbus.Options{})
	a, err := b.Publish("s", "m", map[string]int{"n": 1})
	require.NoError(t, err)
	j, err := b.PublishJSON("s", "m", []byte(`"x"`))
	require.NoError(t, err)
	for _, ev := range []eventbus.Event{a, j} {
		require.True(t, ev.IsJSON())
		require.Equal(t, "application/json", ev.ContentType())
	}
	for _, ev := range readN(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: b.Epoch()}}), 3) {
		require.True(t, ev.IsJSON(), "%v", ev.Type)
	}
}

// A byte payload goes in and comes out as the same bytes with its media
// type: live, from the replay buffer, and after a resume; the caller's
// slice is copied, not retained.
func TestPublishBytesRoundTrip(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	live := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	payloads := [][]byte{{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, {0}, []byte("plain\ntext")}
	var ids []uint64
	for i, p := range payloads {
		in := append([]byte(nil), p...)
		ev, err := b.PublishBytes("s", "blob", "image/png", in, eventbus.WithOrigin("c1"))
		require.NoError(t, err)
		in[0] ^= 0xff // the bus copied it
		ids = append(ids, ev.ID)
		got := next(t, live)
		require.Equal(t, payloads[i], []byte(got.Data))
		require.Equal(t, "image/png", got.ContentType())
		require.Equal(t, "c1", got.Origin)
		require.False(t, got.Replay)
	}
	replay := readN(t, subscribe(t, b, "s", eventbus.SubscribeOptions{}), 3)
	for i, ev := range replay {
		require.Equal(t, ids[i], ev.ID)
		require.True(t, ev.Replay)
		require.Equal(t, payloads[i], []byte(ev.Data))
		require.Equal(t, "image/png", ev.ContentType())
		require.False(t, ev.IsJSON())
	}
	resumed := readN(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: ids[0], Epoch: b.Epoch()}}), 3)
	require.Equal(t, ids[1], resumed[0].ID)
	require.Equal(t, payloads[1], []byte(resumed[0].Data))
	require.Equal(t, frame.TypeReplayComplete, resumed[2].Type)
}

// A byte payload never merges: a compacting replay buffer keeps it as
// published between the folded JSON chunks, and a coalescing subscriber
// receives it on its own, ending the group before it.
func TestBytePayloadsNeverMerge(t *testing.T) {
	b := newBus(t, eventbus.Options{ReplayCompact: coalesce.ACP})
	publishReply(t, b, "s", 0, 3)
	// A chunk's type and bytes that read as a chunk: the rule set would
	// merge them, were they JSON.
	raw := chunk("s", "raw")
	for range 2 {
		_, err := b.PublishBytes("s", chunkType, "text/plain", raw)
		require.NoError(t, err)
	}
	publishReply(t, b, "s", 3, 5)
	check := func(evs []eventbus.Event) {
		t.Helper()
		require.Len(t, evs, 5, "%v", describe(evs))
		require.Equal(t, 3, evs[0].Count)
		require.Equal(t, "t0 t1 t2 ", chunkText(t, evs[0]))
		for _, ev := range evs[1:3] {
			require.Zero(t, ev.Count)
			require.Equal(t, string(raw), string(ev.Data))
			require.Equal(t, "text/plain", ev.ContentType())
		}
		require.Equal(t, 2, evs[3].Count)
		require.Equal(t, "t3 t4 ", chunkText(t, evs[3]))
		require.Equal(t, frame.TypeReplayComplete, evs[4].Type)
	}
	check(readN(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: b.Epoch()}}), 5))

	m := newBus(t, eventbus.Options{})
	sub := subscribe(t, m, "s", eventbus.SubscribeOptions{NoReplay: true, Coalesce: coalesce.ACP})
	publishReply(t, m, "s", 0, 3)
	for range 2 {
		_, err := m.PublishBytes("s", chunkType, "text/plain", raw)
		require.NoError(t, err)
	}
	publishReply(t, m, "s", 3, 5)
	evs := readN(t, sub, 4)
	check(append(evs, eventbus.Event{Type: frame.TypeReplayComplete}))
}

// Event.WithContentType marks a decoded event's payload; its media type
// errors are PublishBytes's.
func TestEventWithContentType(t *testing.T) {
	ev, err := eventbus.Event{Data: []byte{1, 2}}.WithContentType("Application/Octet-Stream")
	require.NoError(t, err)
	require.Equal(t, "application/octet-stream", ev.ContentType())
	require.False(t, ev.IsJSON())
	back, err := ev.WithContentType("application/json")
	require.NoError(t, err)
	require.True(t, back.IsJSON())
	_, err = ev.WithContentType("nope")
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	require.ErrorContains(t, err, `malformed media type "nope"`)
}

// BenchmarkPublishBytes is BenchmarkPublish's W1 with a byte payload
// (PublishBytes, application/octet-stream) beside the same payload as
// JSON (PublishJSON): what the media type costs a publish and a delivery
// (the record's extension, one allocation).
func BenchmarkPublishBytes(b *testing.B) {
	for _, S := range []int{0, 1} {
		for _, kind := range []string{"json", "bytes"} {
			b.Run(kind+"/subs="+strconv.Itoa(S), func(b *testing.B) {
				bus := benchNewBus(b, eventbus.Options{})
				defer bus.Close()
				subs := benchSubscribe(b, bus, "s", S, benchLossless)
				d := benchDrain(subs, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var err error
					if kind == "json" {
						_, err = bus.PublishJSON("s", benchType, benchPayload)
					} else {
						_, err = bus.PublishBytes("s", benchType, "application/octet-stream", benchPayload)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				d.wait(b, time.Minute)
				b.StopTimer()
				for _, s := range subs {
					s.Close()
				}
			})
		}
	}
}
