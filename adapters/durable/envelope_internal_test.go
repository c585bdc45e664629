package durable

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
)

// envelope is the shape appendEnvelope writes by hand.
type envelope struct {
	ID          uint64          `json:"id"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data,omitempty"`
	ContentType string          `json:"contentType,omitempty"`
	Encoding    string          `json:"encoding,omitempty"`
	Origin      string          `json:"origin,omitempty"`
}

// appendEnvelope writes what encoding/json writes for envelope (read back
// equal), for any type, origin and JSON payload, and for a byte payload
// its bytes in base64 (encoding/json's []byte) with its media type.
func TestAppendEnvelopeIsTheJSONEnvelope(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ev := eventbus.Event{
			ID:     rapid.Uint64().Draw(t, "id"),
			Type:   rapid.String().Draw(t, "type"),
			Origin: rapid.String().Draw(t, "origin"),
		}
		want := envelope{ID: ev.ID, Type: ev.Type, Origin: ev.Origin}
		if rapid.Bool().Draw(t, "bytes") {
			var err error
			ev.Data = rapid.SliceOf(rapid.Byte()).Draw(t, "raw")
			ev, err = ev.WithContentType(rapid.SampledFrom([]string{"application/octet-stream", "text/plain; charset=utf-8", "image/png"}).Draw(t, "ct"))
			require.NoError(t, err)
			want.ContentType, want.Encoding = ev.ContentType(), "base64"
			if len(ev.Data) > 0 {
				want.Data, _ = json.Marshal([]byte(ev.Data))
			}
		} else if rapid.Bool().Draw(t, "hasData") {
			ev.Data, _ = json.Marshal(rapid.String().Draw(t, "data"))
			want.Data = ev.Data
		}
		nl := rapid.Bool().Draw(t, "nl")
		got := appendEnvelope(nil, ev, nl)
		if nl {
			require.Equal(t, byte('\n'), got[len(got)-1])
			got = got[:len(got)-1]
		}
		require.True(t, json.Valid(got), "%s", got)
		var back envelope
		require.NoError(t, json.Unmarshal(got, &back))
		wb, _ := json.Marshal(want)
		var wantBack envelope
		require.NoError(t, json.Unmarshal(wb, &wantBack))
		require.Equal(t, wantBack, back)
	})
}
