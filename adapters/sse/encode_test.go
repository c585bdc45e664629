package sse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

func TestAppendEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   eventbus.Event
		opts sse.EncodeOptions
		want string
	}{
		{
			name: "real event",
			ev:   eventbus.Event{ID: 7, Session: "s1", Type: "tool_call", Data: json.RawMessage(`{"a":1}`)},
			want: "id: 7\nevent: tool_call\ndata: {\"v\":1,\"id\":7,\"type\":\"tool_call\",\"session\":\"s1\",\"data\":{\"a\":1}}\n\n",
		},
		{
			name: "replayed with origin",
			ev:   eventbus.Event{ID: 3, Session: "s1", Type: "plan", Data: json.RawMessage(`[1]`), Replay: true, Origin: "tab-1"},
			want: "id: 3\nevent: plan\ndata: {\"v\":1,\"id\":3,\"type\":\"plan\",\"session\":\"s1\",\"data\":[1],\"replay\":true,\"origin\":\"tab-1\"}\n\n",
		},
		{
			name: "synthetic frame has no id",
			ev:   eventbus.Event{Session: "s1", Type: frame.TypeReplayComplete, Data: json.RawMessage(`{"lastReplayedEventId":3,"replayedCount":0}`)},
			want: "event: replay_complete\ndata: {\"v\":1,\"type\":\"replay_complete\",\"session\":\"s1\",\"data\":{\"lastReplayedEventId\":3,\"replayedCount\":0}}\n\n",
		},
		{
			name: "no data",
			ev:   eventbus.Event{ID: 1, Session: "s", Type: "t"},
			want: "id: 1\nevent: t\ndata: {\"v\":1,\"id\":1,\"type\":\"t\",\"session\":\"s\"}\n\n",
		},
		{
			name: "epoch-qualified id",
			ev:   eventbus.Event{ID: 42, Session: "s", Type: "t", Data: json.RawMessage(`null`)},
			opts: sse.EncodeOptions{Epoch: "ab12"},
			want: "id: ab12-42\nevent: t\ndata: {\"v\":1,\"id\":42,\"type\":\"t\",\"session\":\"s\",\"data\":null}\n\n",
		},
		{
			name: "epoch cannot inject a line",
			ev:   eventbus.Event{ID: 1, Session: "s", Type: "t"},
			opts: sse.EncodeOptions{Epoch: "a\r\nb\x00"},
			want: "id: ab-1\nevent: t\ndata: {\"v\":1,\"id\":1,\"type\":\"t\",\"session\":\"s\"}\n\n",
		},
		{
			name: "CR LF NUL in type are neutralised on the event line, exact in the envelope",
			ev:   eventbus.Event{ID: 2, Session: "s", Type: "a\r\nid: 99\rb\x00"},
			want: "id: 2\nevent: a__id: 99_b_\ndata: {\"v\":1,\"id\":2,\"type\":\"a\\r\\nid: 99\\rb\\u0000\",\"session\":\"s\"}\n\n",
		},
		{
			name: "multi-line payload split over data lines",
			ev:   eventbus.Event{ID: 5, Session: "s", Type: "t", Data: json.RawMessage("{\n \"a\": 1\r\n}\r")},
			want: "id: 5\nevent: t\ndata: {\"v\":1,\"id\":5,\"type\":\"t\",\"session\":\"s\",\"data\":{\ndata:  \"a\": 1\ndata: }\ndata: }\n\n",
		},
		{
			name: "strings escaped like encoding/json",
			ev:   eventbus.Event{Session: "q\"\\\t\u2028\xff<", Type: "t"},
			want: "event: t\ndata: {\"v\":1,\"type\":\"t\",\"session\":\"q\\\"\\\\\\t\\u2028\\ufffd<\"}\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(sse.AppendEvent(nil, tt.ev, tt.opts))
			assert.Equal(t, tt.want, got)

			var buf bytes.Buffer
			require.NoError(t, sse.WriteEvent(&buf, tt.ev, tt.opts))
			assert.Equal(t, tt.want, buf.String())

			buf.Reset()
			require.NoError(t, sse.NewEncoder(&buf, tt.opts).Encode(tt.ev))
			assert.Equal(t, tt.want, buf.String())
		})
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "\x00\x01\x1f\x7f", "é€😀", "\xff\xfe", "a\u2028b\u2029c", `"\/`, "\b\f\n\r\t", "<>&"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		want := strings.TrimSuffix(buf.String(), "\n")
		frame := string(sse.AppendEvent(nil, eventbus.Event{Type: "t", Session: s}, sse.EncodeOptions{}))
		assert.Contains(t, frame, `"session":`+want+`}`, "string %q", s)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestEncoderReturnsWriteError(t *testing.T) {
	t.Parallel()
	enc := sse.NewEncoder(failWriter{}, sse.EncodeOptions{})
	assert.EqualError(t, enc.Encode(eventbus.Event{Type: "t"}), "boom")
	assert.EqualError(t, sse.WriteEvent(failWriter{}, eventbus.Event{Type: "t"}, sse.EncodeOptions{}), "boom")
}

var benchEvent = eventbus.Event{
	ID: 123456, Session: "session-0123456789", Type: "agent_message_chunk",
	Data: json.RawMessage(`{"sessionId":"session-0123456789","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello, this is a token delta of typical size."}}}`),
}

// BenchmarkEncode measures one typical agent_message_chunk frame (~300
// bytes) through a reused Encoder, AppendEvent into a reused slice, and the
// pooled WriteEvent.
func BenchmarkEncode(b *testing.B) {
	b.Run("Encoder", func(b *testing.B) {
		enc := sse.NewEncoder(io.Discard, sse.EncodeOptions{})
		b.ReportAllocs()
		b.SetBytes(int64(len(sse.AppendEvent(nil, benchEvent, sse.EncodeOptions{}))))
		for b.Loop() {
			if err := enc.Encode(benchEvent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncoderEpochIDs", func(b *testing.B) {
		enc := sse.NewEncoder(io.Discard, sse.EncodeOptions{Epoch: "0123456789abcdef"})
		b.ReportAllocs()
		for b.Loop() {
			if err := enc.Encode(benchEvent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendEvent", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		for b.Loop() {
			buf = sse.AppendEvent(buf[:0], benchEvent, sse.EncodeOptions{})
		}
	})
	b.Run("WriteEvent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sse.WriteEvent(io.Discard, benchEvent, sse.EncodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecode measures the client side: parse 1000 frames and decode
// their envelopes per iteration.
func BenchmarkDecode(b *testing.B) {
	frame := sse.AppendEvent(nil, benchEvent, sse.EncodeOptions{})
	stream := bytes.Repeat(frame, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		d := sse.NewDecoder(bytes.NewReader(stream))
		for {
			f, err := d.Next()
			if err != nil {
				break
			}
			if _, err := sse.DecodeEvent(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// AppendFrame writes what Decoder reads back: id, event and data, line
// breaks in the data split over data: lines and joined again with LF.
func TestAppendFrameRoundTrips(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		in   sse.Frame
		wire string
		out  sse.Frame // what the Decoder gives back
	}{
		{"data only", sse.Frame{Data: []byte(`{"type":"start"}`)}, "data: {\"type\":\"start\"}\n\n",
			sse.Frame{Data: []byte(`{"type":"start"}`)}},
		{"id and event", sse.Frame{ID: "e-7", Event: "x", Data: []byte("1")}, "id: e-7\nevent: x\ndata: 1\n\n",
			sse.Frame{ID: "e-7", HasID: true, Event: "x", Data: []byte("1")}},
		{"line breaks", sse.Frame{Data: []byte("a\r\nb\rc\nd")}, "data: a\ndata: b\ndata: c\ndata: d\n\n",
			sse.Frame{Data: []byte("a\nb\nc\nd")}},
		{"field values sanitised", sse.Frame{ID: "a\nb", Event: "c\rd\x00", Data: []byte("[DONE]")}, "id: a_b\nevent: c_d_\ndata: [DONE]\n\n",
			sse.Frame{ID: "a_b", HasID: true, Event: "c_d_", Data: []byte("[DONE]")}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			b := sse.AppendFrame(nil, r.in)
			assert.Equal(t, r.wire, string(b))
			got, err := sse.NewDecoder(bytes.NewReader(b)).Next()
			require.NoError(t, err)
			assert.Equal(t, r.out, got)
		})
	}
}

// Whatever the data, one frame goes out and the Decoder gives the data
// back with its line breaks as LF.
func FuzzAppendFrame(f *testing.F) {
	f.Add("e-1", "x", []byte("a\r\nb"))
	f.Add("", "", []byte(""))
	f.Fuzz(func(t *testing.T, id, event string, data []byte) {
		b := sse.AppendFrame(nil, sse.Frame{ID: id, Event: event, Data: data})
		d := sse.NewDecoder(bytes.NewReader(b))
		got, err := d.Next()
		require.NoError(t, err)
		want := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
		assert.Equal(t, want, string(got.Data))
		_, err = d.Next()
		assert.ErrorIs(t, err, io.EOF, "one frame")
	})
}
