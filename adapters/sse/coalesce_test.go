package sse_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

func chunk(session, s string) map[string]any {
	return map[string]any{"sessionId": session, "update": map[string]any{"sessionUpdate": "agent_message_chunk",
		"content": map[string]any{"type": "text", "text": s}}}
}

func TestHandlerCoalesceQueryValidated(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "hello", nil)
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
	for _, c := range []struct {
		query, code, inMsg string
	}{
		{"coalesce=bogus", resume.CodeInvalidCoalesce, `"bogus"`},
		{"coalesce=ACP", resume.CodeInvalidCoalesce, `"ACP"`},
		{"coalesce=acp&throttle=abc", resume.CodeInvalidThrottle, `"abc"`},
		{"coalesce=acp&throttle=150", resume.CodeInvalidThrottle, `"150"`},
		{"coalesce=acp&throttle=6s", resume.CodeInvalidThrottle, `"6s"`},
		{"coalesce=acp&throttle=-1ms", resume.CodeInvalidThrottle, `"-1ms"`},
		{"throttle=150ms", resume.CodeInvalidThrottle, `"150ms"`},
		{"coalesce=off&throttle=150ms", resume.CodeInvalidThrottle, `"150ms"`},
		{"coalesce=acp&coalesce=off", resume.CodeInvalidQuery, "coalesce"},
	} {
		t.Run(c.query, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/session/s1/events?" + c.query)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var body struct{ Code, Message string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, c.code, body.Code)
			assert.Contains(t, body.Message, c.inMsg)
		})
	}
	assert.Zero(t, b.Stats().Subscribers)
}

// With ?coalesce=acp a replay of many chunks is one frame whose SSE id is
// the last merged id, with count and firstId in the envelope; resuming from
// it repeats nothing.
func TestHandlerCoalesceFrames(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	var want strings.Builder
	var first, last eventbus.Event
	for i := range 500 {
		s := string(rune('a' + i%26))
		want.WriteString(s)
		last = publish(t, b, "s1", "agent_message_chunk", chunk("s1", s))
		if i == 0 {
			first = last
		}
	}
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{PlainIDs: true}), nil)
	u := srv.URL + "/session/s1/events?coalesce=acp&throttle=150ms"

	s := openRaw(t, u+"&lastEventId=0", nil)
	ev := s.next(t)
	assert.Equal(t, last.ID, ev.ID)
	assert.Equal(t, resume.FormatID(last.ID, ""), s.dec.LastEventID(), "the SSE id is the last merged id")
	assert.Equal(t, 500, ev.Count)
	assert.Equal(t, first.ID, ev.FirstID)
	var d struct {
		Update struct{ Content struct{ Text string } }
	}
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	assert.Equal(t, want.String(), d.Update.Content.Text)
	assert.Equal(t, frame.TypeReplayComplete, s.next(t).Type)
	s.close()

	// Resume from the merged frame's id: nothing it held comes again.
	r := openRaw(t, u, http.Header{"Last-Event-ID": {s.dec.LastEventID()}})
	ev = r.next(t)
	assert.Equal(t, frame.TypeReplayComplete, ev.Type)
	assert.JSONEq(t, `{"lastReplayedEventId":`+resume.FormatID(last.ID, "")+`,"replayedCount":0}`, string(ev.Data))
	next := publish(t, b, "s1", "agent_message_chunk", chunk("s1", "z"))
	ev = r.next(t)
	assert.Equal(t, next.ID, ev.ID)
	assert.Zero(t, ev.Count)
	r.close()

	// Without coalesce every event is a frame of its own.
	resp, err := http.Get(srv.URL + "/session/s1/events?coalesce=off&lastEventId=" + url.QueryEscape(resume.FormatID(last.ID-2, "")))
	require.NoError(t, err)
	defer resp.Body.Close()
	dec := sse.NewDecoder(resp.Body)
	for _, id := range []uint64{last.ID - 1, last.ID, next.ID} {
		f, err := dec.Next()
		require.NoError(t, err)
		ev, err := sse.DecodeEvent(f)
		require.NoError(t, err)
		assert.Equal(t, id, ev.ID)
		assert.NotContains(t, string(f.Data), `"count"`)
	}
}
