package durable

import (
	"encoding/base64"
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
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
	b = textutil.AppendJSONString(b, ev.Type)
	if !ev.IsJSON() {
		if len(ev.Data) > 0 {
			b = append(b, `,"data":"`...)
			b = base64.StdEncoding.AppendEncode(b, ev.Data)
			b = append(b, '"')
		}
		b = append(b, `,"contentType":`...)
		b = textutil.AppendJSONString(b, ev.ContentType())
		b = append(b, `,"encoding":"base64"`...)
	} else if len(ev.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, ev.Data...)
	}
	if ev.Origin != "" {
		b = append(b, `,"origin":`...)
		b = textutil.AppendJSONString(b, ev.Origin)
	}
	b = append(b, '}')
	if nl {
		b = append(b, '\n')
	}
	return b
}
