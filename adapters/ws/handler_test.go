package ws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// TestReplayLiveAndSessionClosed: replay with a URL cursor, replay_complete,
// live events, then session_closed and close 1000.
func TestReplayLiveAndSessionClosed(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	publish(t, s.bus, "s1", 3)
	c := dial(t, s.url("s1", "lastEventId=1"))
	ev, epoch := readEpoch(t, c)
	assert.Equal(t, eventbus.Event{ID: 2, Session: "s1", Type: "msg", Data: json.RawMessage(`{"n":1}`), Replay: true}, ev)
	assert.Equal(t, s.bus.Epoch(), epoch, "every id comes with its epoch")
	assert.EqualValues(t, 3, read(t, c).ID)
	rc, ep := readEpoch(t, c)
	assert.Equal(t, frame.TypeReplayComplete, rc.Type)
	assert.Zero(t, rc.ID)
	assert.Empty(t, ep, "no epoch on a synthetic frame")
	publish(t, s.bus, "s1", 1)
	live := read(t, c)
	assert.EqualValues(t, 4, live.ID)
	assert.False(t, live.Replay)
	require.NoError(t, s.bus.CloseSession("s1"))
	ce, evs := readClose(t, c)
	require.Len(t, evs, 1)
	assert.Equal(t, frame.TypeSessionClosed, evs[0].Type)
	assert.Equal(t, websocket.StatusNormalClosure, ce.Code)
}

// TestErrorsBeforeUpgrade: the SSE answers, as JSON, with nothing upgraded.
func TestErrorsBeforeUpgrade(t *testing.T) {
	s := newServer(t, eventbus.Options{MaxSubscribers: 1}, ws.HandlerOptions{
		Authorize: func(r *http.Request, id string, _ scope.Kind) error {
			if id == "secret" {
				return assert.AnError
			}
			return nil
		},
	})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	require.NoError(t, s.bus.CreateSession("gone", ""))
	require.NoError(t, s.bus.CloseSession("gone"))
	cases := []struct {
		path, q string
		status  int
		code    string
	}{
		{"s1", "scope=galaxy", 400, resume.CodeInvalidScope},
		{"s1", "maxQueued=9", 400, resume.CodeInvalidMaxQueued},
		{"s1", "replay=2", 400, resume.CodeInvalidReplay},
		{"s1", "lastEventId=-1", 400, resume.CodeInvalidLastEventID},
		{"s1", "events=none", 400, resume.CodeInvalidEvents},
		{"secret", "", 403, resume.CodeForbidden},
		{"nope", "", 404, resume.CodeSessionNotFound},
		{"gone", "", 410, resume.CodeSessionClosed},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		_, resp, err := websocket.Dial(ctx, s.url(tc.path, tc.q), nil)
		cancel()
		require.Error(t, err, "%s?%s", tc.path, tc.q)
		require.NotNil(t, resp)
		assert.Equal(t, tc.status, resp.StatusCode, "%s?%s", tc.path, tc.q)
		var body struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		assert.Equal(t, tc.code, body.Code, "%s?%s: %s", tc.path, tc.q, body.Message)
	}
	// 429 with Retry-After at the subscriber cap.
	first := dial(t, s.url("s1", "replay=0&lastEventId=0"))
	_ = first
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, s.url("s1", ""), nil)
	require.Error(t, err)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	// Not a handshake: 426, nothing subscribed.
	r, err := http.Get(strings.Replace(s.url("s1", ""), "ws://", "http://", 1))
	require.NoError(t, err)
	_ = r.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, r.StatusCode)
	assert.Equal(t, 1, testkit.SubscriberCounts(s.bus)["s1"])
	assert.EqualValues(t, 10, s.h.Stats().Rejected)
}

// TestPingMessage: {"ping": v} → pong frame with v.
func TestPingMessage(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	c := dial(t, s.url("s1", ""))
	send(t, c, `{"ping":{"t":7}}`)
	ev := read(t, c)
	assert.Equal(t, ws.TypePong, ev.Type)
	assert.JSONEq(t, `{"t":7}`, string(ev.Data))
	assert.Zero(t, ev.ID)
}

// TestBadClientMessages: each closes 1008 (1003, 1009) naming the problem.
func TestBadClientMessages(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	cases := []struct {
		msg    string
		code   websocket.StatusCode
		reason string
	}{
		{`hello`, websocket.StatusPolicyViolation, "want a JSON object"},
		{`{"subscribe":"x"}`, websocket.StatusPolicyViolation, `unknown message "subscribe"`},
		{`{"ping":1,"ping":2}`, websocket.StatusPolicyViolation, "exactly one"},
		{`{"resume":{"lastEventId":"1.5"}}`, websocket.StatusPolicyViolation, `lastEventId "1.5": want decimal digits only`},
		{`{"resume":{"lastEventId":"1"}}`, websocket.StatusPolicyViolation, "resume too late"},
		{`{"ping":1} x`, websocket.StatusPolicyViolation, "trailing data"},
		{`{"type":"stop"}`, websocket.StatusPolicyViolation, `unknown message type "stop" (want "cancel")`},
		{`{"type":"cancel","turn":5}`, websocket.StatusPolicyViolation, `cancel: "turn" must be a string`},
		{`{"type":"cancel","ping":1}`, websocket.StatusPolicyViolation, `cancel: unknown member "ping"`},
		{`{"ping":` + strings.Repeat(" ", 5000) + `1}`, websocket.StatusMessageTooBig, ""},
	}
	for _, tc := range cases {
		c := dial(t, s.url("s1", "replay=0"))
		send(t, c, tc.msg)
		ce, _ := readClose(t, c)
		assert.Equal(t, tc.code, ce.Code, "%.40s", tc.msg)
		assert.Contains(t, ce.Reason, tc.reason, "%.40s", tc.msg)
	}
	c := dial(t, s.url("s1", "replay=0"))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.Write(ctx, websocket.MessageBinary, []byte{1, 2}))
	ce, _ := readClose(t, c)
	assert.Equal(t, websocket.StatusUnsupportedData, ce.Code)
	// The library writes 1009 before our reader learns of it: wait.
	assert.Eventually(t, func() bool { return s.h.Stats().ProtocolErrors == uint64(len(cases)+1) }, waitFor, time.Millisecond)
}

// TestShutdownGoingAway: Handler.Close closes every connection with 1001.
func TestShutdownGoingAway(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	c := dial(t, s.url("s1", ""))
	require.Eventually(t, func() bool { return s.h.Stats().Active == 1 }, waitFor, time.Millisecond)
	require.NoError(t, s.h.Close())
	ce, _ := readClose(t, c)
	assert.Equal(t, websocket.StatusGoingAway, ce.Code)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, s.url("s1", ""), nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

// TestCoalesceOverWebSocket: ?coalesce=acp works as on SSE (the parameters
// are parsed by the same code): five queued chunks arrive as one merged
// frame carrying the last id, count and firstId.
func TestCoalesceOverWebSocket(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	for _, text := range []string{"He", "ll", "o ", "wo", "rld"} {
		_, err := s.bus.Publish("s1", "agent_message_chunk", map[string]any{
			"sessionId": "s1", "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})
		require.NoError(t, err)
	}
	c := dial(t, s.url("s1", "coalesce=acp"))
	send(t, c, `{"resume":{"lastEventId":"0"}}`)
	ev := read(t, c)
	assert.EqualValues(t, 5, ev.ID)
	assert.Equal(t, 5, ev.Count)
	assert.EqualValues(t, 1, ev.FirstID)
	assert.Contains(t, string(ev.Data), `"text":"Hello world"`)
	assert.Equal(t, frame.TypeReplayComplete, read(t, c).Type)
}
