package durable

import (
	"encoding/base64"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
)

// appendEnvelope appends ev's envelope {"id","type","data","origin"} (the
// JSON of envelope) to b, and a newline when nl is set: by hand, as this
// runs once per event read. A byte payload's data is its bytes in base64,
// with "contentType" and "encoding":"base64" (the SSE and WebSocket
// routes' form, docs/protocol.md).
func appendEnvelope(b []byte, ev eventbus.Event, nl bool) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, ev.ID, 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, ev.Type)
	if !ev.IsJSON() {
		if len(ev.Data) > 0 {
			b = append(b, `,"data":"`...)
			b = base64.StdEncoding.AppendEncode(b, ev.Data)
			b = append(b, '"')
		}
		b = append(b, `,"contentType":`...)
		b = appendJSONString(b, ev.ContentType())
		b = append(b, `,"encoding":"base64"`...)
	} else if len(ev.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, ev.Data...)
	}
	if ev.Origin != "" {
		b = append(b, `,"origin":`...)
		b = appendJSONString(b, ev.Origin)
	}
	b = append(b, '}')
	if nl {
		b = append(b, '\n')
	}
	return b
}

// appendJSONString appends s as a JSON string. The bus refuses control
// characters in types and origins, but any that come are escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
