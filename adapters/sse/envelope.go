package sse

import (
	"strconv"

	"github.com/replaybus/replaybus/eventbus"
)

// AppendEnvelope appends ev's JSON envelope alone — the object an SSE
// frame carries on its data: line — to dst and returns the extended slice:
//
//	{"v":1,"id":42,"epoch":"…","type":"…","session":"…","data":…,"replay":true,"origin":"…"}
//
// "id" is left out for a synthetic frame (ev.ID 0), "epoch" is written only
// when epoch is non-empty and ev.ID is not 0, "data" only when ev.Data is
// not empty (copied as is: the JSON the bus encoded at publish, line breaks
// included), "replay" only when true, "origin" only when set, "count" and
// "firstId" only for a merged event of a coalescing subscription
// (ev.Count ≥ 2; its id is the last merged one's). Strings are
// escaped as in [AppendEvent]. Other transports use it so that every
// transport carries the same envelope (the WebSocket adapter sends one per
// text message, with the bus epoch). Pure and safe for concurrent use; it
// allocates only when dst has to grow.
func AppendEnvelope(dst []byte, ev eventbus.Event, epoch string) []byte {
	dst = append(dst, `{"v":1`...)
	if ev.ID != 0 {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendUint(dst, ev.ID, 10)
		if epoch != "" {
			dst = append(dst, `,"epoch":`...)
			dst = appendJSONString(dst, epoch)
		}
	}
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, ev.Type)
	dst = append(dst, `,"session":`...)
	dst = appendJSONString(dst, ev.Session)
	if len(ev.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, ev.Data...)
	}
	if ev.Replay {
		dst = append(dst, `,"replay":true`...)
	}
	if ev.Origin != "" {
		dst = append(dst, `,"origin":`...)
		dst = appendJSONString(dst, ev.Origin)
	}
	if ev.Count > 1 { // a merged event of a coalescing subscription
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendInt(dst, int64(ev.Count), 10)
		dst = append(dst, `,"firstId":`...)
		dst = strconv.AppendUint(dst, ev.FirstID, 10)
	}
	return append(dst, '}')
}
