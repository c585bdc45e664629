package sse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// decodeAll reads every frame of in, also one byte per Read, and checks
// that both ways agree.
func decodeAll(t *testing.T, in string) []sse.Frame {
	t.Helper()
	read := func(r io.Reader) []sse.Frame {
		var out []sse.Frame
		d := sse.NewDecoder(r)
		for {
			f, err := d.Next()
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				return out
			}
			f.Data = bytes.Clone(f.Data)
			out = append(out, f)
		}
	}
	whole := read(strings.NewReader(in))
	assert.Equal(t, whole, read(iotest.OneByteReader(strings.NewReader(in))), "byte-at-a-time reads differ")
	return whole
}

func TestDecoderLineEnds(t *testing.T) {
	t.Parallel()
	want := []sse.Frame{
		{ID: "1", HasID: true, Event: "a", Data: []byte("x\ny")},
		{ID: "1", Event: "", Data: []byte("z")},
	}
	tests := map[string]string{
		"LF":          "id: 1\nevent: a\ndata: x\ndata: y\n\ndata: z\n\n",
		"CRLF":        "id: 1\r\nevent: a\r\ndata: x\r\ndata: y\r\n\r\ndata: z\r\n\r\n",
		"CR":          "id: 1\revent: a\rdata: x\rdata: y\r\rdata: z\r\r",
		"mixed":       "id: 1\r\nevent: a\rdata: x\ndata: y\r\n\rdata: z\n\r\n",
		"BOM":         "\xEF\xBB\xBFid: 1\nevent: a\ndata: x\ndata: y\n\ndata: z\n\n",
		"comments":    ": hi\nid: 1\n: heartbeat\nevent: a\ndata: x\ndata: y\n\n:\n\ndata: z\n\n",
		"retry+extra": "retry: 10\nid: 1\nfoo: bar\nevent: a\ndata: x\ndata: y\n\ndata: z\n\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, want, decodeAll(t, in))
		})
	}
}

func TestDecoderFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []sse.Frame
	}{
		{"no space after colon", "data:x\n\n", []sse.Frame{{Data: []byte("x")}}},
		{"only one space removed", "data:  x\n\n", []sse.Frame{{Data: []byte(" x")}}},
		{"field without colon", "data\n\n", []sse.Frame{{Data: []byte("")}}},
		{"empty data lines", "data\ndata\n\n", []sse.Frame{{Data: []byte("\n")}}},
		{"no data: not dispatched", "event: a\nid: 5\n\ndata: b\n\n", []sse.Frame{{ID: "5", Data: []byte("b")}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\n",
			[]sse.Frame{{ID: "1", HasID: true, Data: []byte("a")}, {ID: "1", Data: []byte("b")}}},
		{"unterminated frame dropped", "data: a\n\ndata: b", []sse.Frame{{Data: []byte("a")}}},
		{"unterminated line dropped", "data: a\n\ndata: b\n", []sse.Frame{{Data: []byte("a")}}},
		{"BOM only first", "\xEF\xBB\xBFdata: \xEF\xBB\xBFa\n\n", []sse.Frame{{Data: []byte("\xEF\xBB\xBFa")}}},
		{"event reset after dispatch", "event: e\ndata: a\n\ndata: b\n\n",
			[]sse.Frame{{Event: "e", Data: []byte("a")}, {Data: []byte("b")}}},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, decodeAll(t, tt.in))
		})
	}
}

func TestDecoderRetryAndLastEventID(t *testing.T) {
	t.Parallel()
	d := sse.NewDecoder(strings.NewReader("retry: 1x\n\nretry: 250\n\nid: 9\n\nid: 10\ndata: a\n\nid: 11\ndata"))
	_, ok := d.Retry()
	assert.False(t, ok)
	f, err := d.Next()
	require.NoError(t, err)
	assert.Equal(t, "10", f.ID)
	r, ok := d.Retry()
	assert.True(t, ok)
	assert.Equal(t, 250*time.Millisecond, r)
	_, err = d.Next()
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, "10", d.LastEventID(), "an id in an unterminated frame is not committed")
}

func TestDecoderLimits(t *testing.T) {
	t.Parallel()
	d := sse.NewDecoder(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	d.SetMaxFrameBytes(50)
	_, err := d.Next()
	require.ErrorIs(t, err, sse.ErrFrameTooLarge)

	d = sse.NewDecoder(strings.NewReader(strings.Repeat("data: xxxxxxxx\n", 20) + "\n"))
	d.SetMaxFrameBytes(100)
	_, err = d.Next()
	require.ErrorIs(t, err, sse.ErrFrameTooLarge)

	d = sse.NewDecoder(iotest.ErrReader(errors.New("boom")))
	_, err = d.Next()
	require.EqualError(t, err, "boom")
}

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
	ev := eventbus.Event{ID: 9, Session: "s", Type: "t", Data: json.RawMessage(`{"a":[1,2]}`), Replay: true, Origin: "o"}
	frames := decodeAll(t, string(sse.AppendEvent(nil, ev, sse.EncodeOptions{Epoch: "E"})))
	require.Len(t, frames, 1)
	assert.Equal(t, "E-9", frames[0].ID)
	got, err := sse.DecodeEvent(frames[0])
	require.NoError(t, err)
	assert.Equal(t, ev, got)

	// Foreign SSE: still handed over, with an EnvelopeError.
	got, err = sse.DecodeEvent(sse.Frame{ID: "4", HasID: true, Data: []byte("hello")})
	var envErr *sse.EnvelopeError
	require.ErrorAs(t, err, &envErr)
	assert.Equal(t, eventbus.Event{ID: 4, Type: "message", Data: json.RawMessage(`"hello"`)}, got)
	got, _ = sse.DecodeEvent(sse.Frame{Event: "x", Data: []byte(`{"n":1}`)})
	assert.Equal(t, eventbus.Event{Type: "x", Data: json.RawMessage(`{"n":1}`)}, got)
}

func FuzzEncodeDecode(f *testing.F) {
	f.Add(uint64(1), "agent_message_chunk", "s1", "", `{"text":"hi"}`, false, "")
	f.Add(uint64(0), "replay_complete", "s1", "", `{"lastReplayedEventId":0}`, false, "")
	f.Add(uint64(7), "a\r\nid: 9", "s\n", "o\r", "{\r\n\"a\":\n[1,\r2]\n}", true, "ep")
	f.Add(uint64(1<<53-1), "\xff\u2028", "\x00", "<&>", `"just a string"`, true, "e\n")
	f.Add(uint64(3), "t", "s", "", "not json\nat all", false, "")
	f.Fuzz(func(t *testing.T, id uint64, typ, session, origin, payload string, replay bool, epoch string) {
		if typ == "" {
			typ = "message"
		}
		data := json.RawMessage(payload)
		if !json.Valid(data) {
			data, _ = json.Marshal(payload) // the bus only ever holds valid JSON
		}
		ev := eventbus.Event{ID: id, Session: session, Type: typ, Data: data, Origin: origin, Replay: replay}
		wire := sse.AppendEvent(nil, ev, sse.EncodeOptions{Epoch: epoch})

		d := sse.NewDecoder(bytes.NewReader(wire))
		fr, err := d.Next()
		require.NoError(t, err, "wire %q", wire)
		_, err = d.Next()
		require.ErrorIs(t, err, io.EOF, "one frame only: %q", wire)
		assert.Equal(t, id != 0, fr.HasID)
		if id != 0 {
			c, err := resume.ParseCursor(fr.ID)
			if err == nil { // an epoch with bytes outside [A-Za-z0-9_] is not a cursor, by design
				assert.Equal(t, id, c.ID)
			}
			assert.True(t, strings.HasSuffix(fr.ID, "-"+resume.FormatID(id, "")) || fr.ID == resume.FormatID(id, ""))
		}
		assert.NotContains(t, fr.Event, "\r")
		assert.NotContains(t, fr.Event, "\n")

		got, err := sse.DecodeEvent(fr)
		require.NoError(t, err, "wire %q", wire)
		assert.Equal(t, id, got.ID)
		assert.Equal(t, jsonRoundTrip(typ), got.Type)
		assert.Equal(t, jsonRoundTrip(session), got.Session)
		assert.Equal(t, jsonRoundTrip(origin), got.Origin)
		assert.Equal(t, replay, got.Replay)
		assert.Equal(t, compact(t, data), compact(t, got.Data))
		if !bytes.ContainsAny(data, "\r") {
			assert.Equal(t, string(bytes.Trim(data, " \t\n")), string(got.Data), "LF-only payloads survive byte for byte")
		}
	})
}

// jsonRoundTrip is what encoding/json makes of s (invalid UTF-8 → U+FFFD).
func jsonRoundTrip(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b), "%q", b)
	return buf.String()
}

func FuzzDecoder(f *testing.F) {
	f.Add("id: 1\r\nevent: a\rdata: x\n\n")
	f.Add("\xEF\xBB\xBFretry: 5\n: c\ndata\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		d := sse.NewDecoder(iotest.HalfReader(strings.NewReader(in)))
		d.SetMaxFrameBytes(1 << 12)
		for i := 0; ; i++ {
			f, err := d.Next()
			if err != nil {
				return
			}
			require.LessOrEqual(t, i, len(in))
			_, _ = sse.DecodeEvent(f)
		}
	})
}
