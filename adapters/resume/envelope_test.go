package resume_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// bytesEvent is ev with a byte payload of media type ct.
func bytesEvent(t *testing.T, ev eventbus.Event, ct string) eventbus.Event {
	t.Helper()
	ev, err := ev.WithContentType(ct)
	require.NoError(t, err)
	return ev
}

// A byte payload's envelope: "data" in base64, "contentType" and
// "encoding" beside it; a JSON payload has neither. Both decode back to the
// event they came from.
func TestEnvelopeBytePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ev   eventbus.Event
		want string
	}{
		{
			name: "bytes",
			ev:   bytesEvent(t, eventbus.Event{ID: 5, Session: "s", Type: "blob", Data: []byte{0, 1, 0xff, '\n'}, Origin: "o"}, "application/octet-stream"),
			want: `{"v":1,"id":5,"epoch":"E","type":"blob","session":"s","data":"AAH/Cg==","contentType":"application/octet-stream","encoding":"base64","origin":"o"}`,
		},
		{
			name: "bytes that look like JSON stay bytes",
			ev:   bytesEvent(t, eventbus.Event{ID: 6, Session: "s", Type: "blob", Data: []byte(`{"a":1}`), Replay: true}, "text/plain; charset=utf-8"),
			want: `{"v":1,"id":6,"epoch":"E","type":"blob","session":"s","data":"eyJhIjoxfQ==","contentType":"text/plain; charset=utf-8","encoding":"base64","replay":true}`,
		},
		{
			name: "empty bytes keep their type",
			ev:   bytesEvent(t, eventbus.Event{ID: 7, Session: "s", Type: "blob"}, "image/png"),
			want: `{"v":1,"id":7,"epoch":"E","type":"blob","session":"s","contentType":"image/png","encoding":"base64"}`,
		},
		{
			name: "JSON has no contentType",
			ev:   eventbus.Event{ID: 8, Session: "s", Type: "msg", Data: json.RawMessage(`"AAH/Cg=="`)},
			want: `{"v":1,"id":8,"epoch":"E","type":"msg","session":"s","data":"AAH/Cg=="}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := resume.AppendEnvelope(nil, tc.ev, "E")
			require.JSONEq(t, tc.want, string(got))
			require.Equal(t, tc.want, string(got))
			back, epoch, err := resume.DecodeEnvelope(got)
			require.NoError(t, err)
			require.Equal(t, "E", epoch)
			require.Equal(t, tc.ev.ContentType(), back.ContentType())
			require.Equal(t, tc.ev.IsJSON(), back.IsJSON())
			require.Equal(t, string(tc.ev.Data), string(back.Data))
			require.Equal(t, tc.ev.ID, back.ID)
			require.Equal(t, tc.ev.Origin, back.Origin)
		})
	}
}

// DecodeEnvelope refuses a byte payload it cannot read, naming what is
// wrong.
func TestDecodeEnvelopeBadBytePayload(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, env, wantErr string }{
		{"unknown encoding", `{"v":1,"type":"t","session":"s","data":"AA==","contentType":"image/png","encoding":"hex"}`, `byte payload with encoding "hex" (want "base64")`},
		{"encoding missing", `{"v":1,"type":"t","session":"s","data":"AA==","contentType":"image/png"}`, `byte payload with encoding "" (want "base64")`},
		{"data not a string", `{"v":1,"type":"t","session":"s","data":[1],"contentType":"image/png","encoding":"base64"}`, "byte payload's data is not a base64 string"},
		{"data not base64", `{"v":1,"type":"t","session":"s","data":"%%%","contentType":"image/png","encoding":"base64"}`, "byte payload's data is not base64"},
		{"bad media type", `{"v":1,"type":"t","session":"s","data":"AA==","contentType":"png","encoding":"base64"}`, `malformed media type "png"`},
		{"media type missing", `{"v":1,"type":"t","session":"s","data":"AA==","encoding":"base64"}`, `media type "" is empty`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := resume.DecodeEnvelope([]byte(tc.env))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// The handlers' stream_start is one of the types the bus refuses to
// publish, so no event can be taken for it.
func TestStreamStartIsReserved(t *testing.T) {
	require.True(t, frame.Reserved(resume.TypeStreamStart))
}
