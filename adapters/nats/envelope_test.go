package nats

import (
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The stored form round-trips, without copying the payload on ingest, and
// the JSON envelope of earlier versions is still read.
func TestEnvelope(t *testing.T) {
	data := []byte(`{"a":[1,2,3]}`)
	b := appendEnvelope(nil, "agent_message_chunk", 1234567890123, "client-7", "", data)
	require.Len(t, b, envelopeSize("agent_message_chunk", "client-7", "", data))
	require.Equal(t, byte(envelopeV1), b[0], "JSON stays version 1")
	d, err := decodeEnvelope(b)
	require.NoError(t, err)
	assert.Equal(t, decoded{typ: []byte("agent_message_chunk"), nanos: 1234567890123, origin: []byte("client-7"), data: data}, d)
	assert.Same(t, &b[len(b)-len(data)], &d.data[0], "data aliases the message body")

	d, err = decodeEnvelope(appendEnvelope(nil, "t", -5, "", "", nil))
	require.NoError(t, err)
	assert.Equal(t, decoded{typ: []byte("t"), nanos: -5, origin: []byte{}}, d)

	// A byte payload: version 2, the media type after the origin.
	raw := []byte{0, 0xff, '\n', '{'}
	b = appendEnvelope(nil, "blob", 7, "o", "image/png", raw)
	require.Len(t, b, envelopeSize("blob", "o", "image/png", raw))
	require.Equal(t, byte(envelopeV2), b[0])
	d, err = decodeEnvelope(b)
	require.NoError(t, err)
	assert.Equal(t, decoded{typ: []byte("blob"), nanos: 7, origin: []byte("o"), ctype: []byte("image/png"), data: raw}, d)
	d, err = decodeEnvelope(appendEnvelope(nil, "blob", 7, "", "text/plain", nil))
	require.NoError(t, err)
	assert.Equal(t, decoded{typ: []byte("blob"), nanos: 7, origin: []byte{}, ctype: []byte("text/plain")}, d)

	d, err = decodeEnvelope([]byte(`{"type":"old","time":42,"origin":"o","data":{"x":1}}`))
	require.NoError(t, err)
	assert.Equal(t, "old", string(d.typ))
	assert.Equal(t, int64(42), d.nanos)
	assert.Equal(t, "o", string(d.origin))
	assert.JSONEq(t, `{"x":1}`, string(d.data))

	noMedia := []byte{2, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}         // version 2, empty media type
	shortMedia := []byte{2, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 'x'} // media type cut short
	for _, bad := range [][]byte{nil, {}, {2}, {3}, {1}, {1, 0}, {1, 5, 'a'}, {1, 1, 'a', 0, 0}, noMedia, shortMedia, []byte(`{"type":""}`), []byte(`{bad`)} {
		_, err := decodeEnvelope(bad)
		assert.ErrorIs(t, err, errEnvelope, "%q", bad)
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, "x", 1, "o", "", []byte(`{}`)))
	f.Add(appendEnvelope(nil, "x", 1, "o", "image/png", []byte{0, 1}))
	f.Add([]byte(`{"type":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeEnvelope(b)
		if err != nil || len(b) == 0 || b[0] == '{' {
			return
		}
		// What decodes re-encodes to what decodes the same (varints in
		// the input need not be minimal).
		again, err := decodeEnvelope(appendEnvelope(nil, string(d.typ), d.nanos, string(d.origin), string(d.ctype), d.data))
		require.NoError(t, err)
		assert.Equal(t, string(d.typ), string(again.typ))
		assert.Equal(t, d.nanos, again.nanos)
		assert.Equal(t, string(d.origin), string(again.origin))
		assert.Equal(t, string(d.ctype), string(again.ctype))
		assert.Equal(t, string(d.data), string(again.data))
	})
}

// Acks are read without a JSON decode when they have the usual shape, and
// errors, another stream and no responders are told apart.
func TestAckParse(t *testing.T) {
	a := &acker{stream: "S1"}
	msg := func(data string) *natsgo.Msg { return &natsgo.Msg{Data: []byte(data)} }
	seq, err := a.parse(msg(`{"stream":"S1","seq":42}`))
	require.NoError(t, err)
	assert.Equal(t, uint64(42), seq)
	seq, err = a.parse(msg(`{"stream":"S1", "domain":"d","seq":7,"duplicate":true}`))
	require.NoError(t, err)
	assert.Equal(t, uint64(7), seq)
	_, err = a.parse(msg(`{"stream":"OTHER","seq":42}`))
	assert.ErrorIs(t, err, ErrStreamLost)
	_, err = a.parse(msg(`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`))
	assert.ErrorContains(t, err, "maximum messages exceeded")
	_, err = a.parse(&natsgo.Msg{Header: natsgo.Header{"Status": []string{"503"}}})
	assert.ErrorIs(t, err, ErrNoStream)
	_, err = a.parse(msg(`not json`))
	assert.ErrorContains(t, err, "malformed publish ack")
}
