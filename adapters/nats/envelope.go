package nats

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// The stored form of an event (the session comes from the subject).
//
// Since version 1 it is a small binary frame around the payload, which the
// bus validated and encoded once at publish and which is neither re-encoded
// here nor re-validated on ingest:
//
//	0x01                      version
//	uvarint len, bytes        event type
//	8 bytes                   time, Unix ns, big-endian
//	uvarint len, bytes        origin (length 0: none)
//	rest                      data, the JSON payload as published (empty: none)
//
// A byte payload (eventbus.Bus.PublishBytes: not JSON, with a media type)
// is version 2, the same frame with the media type after the origin:
//
//	0x02                      version
//	…                         type, time, origin as in version 1
//	uvarint len, bytes        media type (never empty), e.g. image/png
//	rest                      data, the bytes as published
//
// JSON events stay version 1, so a node of an earlier version still reads
// them; it skips (and logs) a version 2 message: upgrade every node before
// publishing byte payloads. Messages written before version 1 are the JSON
// object {"type","time","origin","data"}; decodeEnvelope still reads them,
// so a node of this version ingests a stream written by an older one.
const (
	envelopeV1 = 0x01
	envelopeV2 = 0x02
)

// appendEnvelope appends the stored form of an event to dst: version 1
// for a JSON payload (contentType ""), version 2 for a byte payload of
// media type contentType.
func appendEnvelope(dst []byte, typ string, nanos int64, origin, contentType string, data []byte) []byte {
	v := byte(envelopeV1)
	if contentType != "" {
		v = envelopeV2
	}
	dst = append(dst, v)
	dst = binary.AppendUvarint(dst, uint64(len(typ)))
	dst = append(dst, typ...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(nanos))
	dst = binary.AppendUvarint(dst, uint64(len(origin)))
	dst = append(dst, origin...)
	if contentType != "" {
		dst = binary.AppendUvarint(dst, uint64(len(contentType)))
		dst = append(dst, contentType...)
	}
	return append(dst, data...)
}

// envelopeSize is the length appendEnvelope produces.
func envelopeSize(typ, origin, contentType string, data []byte) int {
	n := 1 + uvarintLen(len(typ)) + len(typ) + 8 + uvarintLen(len(origin)) + len(origin) + len(data)
	if contentType != "" {
		n += uvarintLen(len(contentType)) + len(contentType)
	}
	return n
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// decoded is one stored event. data aliases the message body (nats.go
// gives every message a buffer of its own).
type decoded struct {
	typ    []byte
	nanos  int64
	origin []byte
	ctype  []byte // a byte payload's media type; nil for JSON
	data   []byte
}

var errEnvelope = errors.New("nats: malformed event envelope")

// decodeEnvelope reads what appendEnvelope wrote, or the JSON envelope of
// earlier versions. An empty type, and a version 2 frame with an empty
// media type, are malformed.
func decodeEnvelope(b []byte) (decoded, error) {
	if len(b) > 0 && b[0] == '{' {
		var env struct {
			Type   string          `json:"type"`
			Time   int64           `json:"time"`
			Origin string          `json:"origin,omitempty"`
			Data   json.RawMessage `json:"data,omitempty"`
		}
		if err := json.Unmarshal(b, &env); err != nil || env.Type == "" {
			return decoded{}, errEnvelope
		}
		return decoded{typ: []byte(env.Type), nanos: env.Time, origin: []byte(env.Origin), data: env.Data}, nil
	}
	if len(b) == 0 || (b[0] != envelopeV1 && b[0] != envelopeV2) {
		return decoded{}, errEnvelope
	}
	v2 := b[0] == envelopeV2
	b = b[1:]
	typ, b, ok := field(b)
	if !ok || len(typ) == 0 || len(b) < 8 {
		return decoded{}, errEnvelope
	}
	nanos := int64(binary.BigEndian.Uint64(b))
	origin, b, ok := field(b[8:])
	if !ok {
		return decoded{}, errEnvelope
	}
	d := decoded{typ: typ, nanos: nanos, origin: origin}
	if v2 {
		if d.ctype, b, ok = field(b); !ok || len(d.ctype) == 0 {
			return decoded{}, errEnvelope
		}
	}
	if len(b) > 0 {
		d.data = b
	}
	return d, nil
}

// field reads one uvarint-prefixed byte string.
func field(b []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}
