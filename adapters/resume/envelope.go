package resume

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// EnvelopeVersion is the value of the "v" field of every envelope
// (qwen-code's EVENT_SCHEMA_VERSION).
const EnvelopeVersion = 1

// TypeStreamStart is the type of the frame that opens a live-only stream
// (replay=0 without a cursor) on both transports: its data
// {"lastEventId":"<epoch>-<seq>","epoch":"…"} is where the stream starts —
// the newest id before it subscribed ("<seq>" alone when the handler writes
// plain ids) — so that a client cut before its first event resumes from
// there and loses nothing. Its envelope has no "id": it is no event. Over
// SSE it also carries the cursor on its id: line, so an EventSource's
// lastEventId takes it; [Stream] takes it as its cursor and does not
// return it.
// The bus refuses to publish it ([frame.Reserved]).
const TypeStreamStart = "stream_start"

// AppendEnvelope appends ev's JSON envelope — the object an SSE frame
// carries on its data: line and a WebSocket frame is — to dst and returns
// the extended slice:
//
//	{"v":1,"id":42,"epoch":"…","type":"…","session":"…","data":…,"replay":true,"origin":"…"}
//
// "id" is left out for a synthetic frame (ev.ID 0), "epoch" is written only
// when epoch is non-empty and ev.ID is not 0, "data" only when ev.Data is
// not empty (copied as is: the JSON the bus encoded at publish, line breaks
// included), "replay" only when true, "origin" only when set, "count" and
// "firstId" only for a merged event of a coalescing subscription
// (ev.Count ≥ 2; its id is the last merged one's).
//
// A byte payload (ev.IsJSON false: published with eventbus.Bus.PublishBytes)
// is written as "data":"<standard base64 of the bytes, padded>" followed by
// "contentType":"<its media type>","encoding":"base64" (the two are written
// for such an event even when it has no data): a JSON payload never has
// "contentType", so a client tells the two apart by its presence
// (docs/protocol.md, "Byte payloads").
//
// Strings are escaped
// as encoding/json escapes them without HTML escaping (U+2028, U+2029 and
// invalid UTF-8 as encoding/json does), so the envelope never holds a raw
// CR or LF outside ev.Data. ev.Time is not written. Pure and safe for
// concurrent use; it allocates only when dst has to grow.
func AppendEnvelope(dst []byte, ev eventbus.Event, epoch string) []byte {
	dst = append(dst, `{"v":1`...)
	if ev.ID != 0 {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendUint(dst, ev.ID, 10)
		if epoch != "" {
			dst = append(dst, `,"epoch":`...)
			dst = textutil.AppendJSONString(dst, epoch)
		}
	}
	dst = append(dst, `,"type":`...)
	dst = textutil.AppendJSONString(dst, ev.Type)
	dst = append(dst, `,"session":`...)
	dst = textutil.AppendJSONString(dst, ev.Session)
	if !ev.IsJSON() {
		dst = appendBytes(dst, ev)
	} else if len(ev.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, ev.Data...)
	}
	if ev.Replay {
		dst = append(dst, `,"replay":true`...)
	}
	if ev.Origin != "" {
		dst = append(dst, `,"origin":`...)
		dst = textutil.AppendJSONString(dst, ev.Origin)
	}
	if ev.Count > 1 { // a merged event of a coalescing subscription
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendInt(dst, int64(ev.Count), 10)
		dst = append(dst, `,"firstId":`...)
		dst = strconv.AppendUint(dst, ev.FirstID, 10)
	}
	return append(dst, '}')
}

// appendBytes writes a byte payload's "data" (base64), "contentType" and
// "encoding" fields.
func appendBytes(dst []byte, ev eventbus.Event) []byte {
	if len(ev.Data) > 0 {
		dst = append(dst, `,"data":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, ev.Data)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"contentType":`...)
	dst = textutil.AppendJSONString(dst, ev.ContentType())
	return append(dst, `,"encoding":"`+EncodingBase64+`"`...)
}

// EncodingBase64 is the value of an envelope's "encoding" field: its
// "data" is a byte payload in standard, padded base64 (RFC 4648 §4), of
// the media type its "contentType" names.
const EncodingBase64 = "base64"

// StartEvent returns the [TypeStreamStart] frame of a live-only stream of
// session that starts at cursor (in the server's form) of epoch; a handler
// writes it before any other frame.
func StartEvent(session, cursor, epoch string) eventbus.Event {
	data, _ := json.Marshal(struct {
		LastEventID string `json:"lastEventId"`
		Epoch       string `json:"epoch"`
	}{cursor, epoch})
	return eventbus.Event{Type: TypeStreamStart, Session: session, Data: data}
}

// envelope is the JSON shape of an envelope, for decoding.
type envelope struct {
	V       int             `json:"v"`
	ID      uint64          `json:"id"`
	Epoch   string          `json:"epoch"`
	Type    string          `json:"type"`
	Session string          `json:"session"`
	Data    json.RawMessage `json:"data"`
	Replay  bool            `json:"replay"`
	Origin  string          `json:"origin"`
	Count   int             `json:"count"`
	FirstID uint64          `json:"firstId"`
	// A byte payload's (see AppendEnvelope).
	ContentType string `json:"contentType"`
	Encoding    string `json:"encoding"`
}

// DecodeEnvelope turns an envelope back into the event it carries — ID,
// Type, Session, Data, Replay, Origin, Count and FirstID (ev.Time is left
// zero), and for a byte payload its bytes (decoded from base64) and media
// type ([eventbus.Event.ContentType]) — and the epoch that came with its
// id ("" when none). JSON that is not an object with "v":[EnvelopeVersion]
// is an error (it wraps the JSON error, if any), and so is a byte payload
// whose "encoding" is not [EncodingBase64], whose "data" is not a base64
// string, or whose "contentType" the bus refuses (eventbus.ErrInvalid).
// Safe for concurrent use.
func DecodeEnvelope(b []byte) (ev eventbus.Event, epoch string, err error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return ev, "", err
	}
	if env.V != EnvelopeVersion {
		return ev, "", fmt.Errorf("want an object with \"v\":%d", EnvelopeVersion)
	}
	ev = eventbus.Event{ID: env.ID, Session: env.Session, Type: env.Type, Data: env.Data, Origin: env.Origin,
		Replay: env.Replay, Count: env.Count, FirstID: env.FirstID}
	if env.ContentType == "" && env.Encoding == "" {
		return ev, env.Epoch, nil
	}
	if env.Encoding != EncodingBase64 {
		return eventbus.Event{}, "", fmt.Errorf("byte payload with encoding %s (want %q)", quote(env.Encoding), EncodingBase64)
	}
	ev.Data = nil
	if len(env.Data) > 0 {
		var s string
		if err := json.Unmarshal(env.Data, &s); err != nil {
			return eventbus.Event{}, "", fmt.Errorf("byte payload's data is not a base64 string: %w", err)
		}
		if ev.Data, err = base64.StdEncoding.DecodeString(s); err != nil {
			return eventbus.Event{}, "", fmt.Errorf("byte payload's data is not base64: %w", err)
		}
	}
	if ev, err = ev.WithContentType(env.ContentType); err != nil {
		return eventbus.Event{}, "", err
	}
	return ev, env.Epoch, nil
}
