package ws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// handshake sends a hand-made upgrade request to s for session s1 and
// returns the answer's status, headers and JSON body.
func handshake(t *testing.T, s *server, q string, hdr map[string][]string) (int, http.Header, string, string) {
	t.Helper()
	u := strings.Replace(s.url("s1", q), "ws://", "http://", 1)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	for k, v := range hdr {
		if v == nil {
			req.Header.Del(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct{ Code, Message string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), "a JSON body")
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	return resp.StatusCode, resp.Header, body.Code, body.Message
}

// TestRefusedOriginNeverSubscribes: a page from a foreign origin was
// subscribed (and, with a cursor, replayed to) before coder/websocket's
// Accept refused it in text/plain. Now the origin is checked first: 403
// forbidden_origin as JSON, and neither Authorize, Configure nor the bus
// ever sees the request — no subscriber, no replay.
func TestRefusedOriginNeverSubscribes(t *testing.T) {
	var hooks atomic.Int32
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{
		Authorize: func(*http.Request, string, scope.Kind) error { hooks.Add(1); return nil },
		Configure: func(*http.Request, *eventbus.SubscribeOptions) { hooks.Add(1) },
		Accept:    &websocket.AcceptOptions{OriginPatterns: []string{"app.example", "https://*.trusted.example"}},
	})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	publish(t, s.bus, "s1", 3)

	for _, origin := range []string{"http://evil.example", "null", "https://evil.trusted.example.com", "http://x.trusted.example"} {
		// lastEventId=0: a subscription made before the check would replay 3 events.
		status, _, code, msg := handshake(t, s, "lastEventId=0", map[string][]string{"Origin": {origin}})
		assert.Equal(t, http.StatusForbidden, status, origin)
		assert.Equal(t, ws.CodeForbiddenOrigin, code, origin)
		assert.Contains(t, msg, origin, "names the origin")

		// The library's own client sees the same answer.
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		_, resp, err := websocket.Dial(ctx, s.url("s1", "lastEventId=0"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		cancel()
		require.Error(t, err)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	}
	assert.Zero(t, hooks.Load(), "Authorize and Configure never ran")
	assert.Zero(t, s.bus.Stats().Replayed, "nothing was subscribed, so nothing was replayed")
	assert.Empty(t, testkit.SubscriberCounts(s.bus))
	assert.Zero(t, s.bus.Stats().Subscribers)
	assert.EqualValues(t, 8, s.h.Stats().Rejected)
	assert.Zero(t, s.h.Stats().Started)

	// Allowed origins (a pattern, a scheme pattern, the host itself) connect.
	for _, origin := range []string{"http://app.example", "https://a.trusted.example", "http://" + strings.TrimPrefix(s.ts.URL, "http://")} {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		c, _, err := websocket.Dial(ctx, s.url("s1", "lastEventId=2"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		cancel()
		require.NoError(t, err, origin)
		assert.Equal(t, uint64(3), read(t, c).ID, origin)
		_ = c.CloseNow()
	}
}

// TestHandshakeRefusalsAreJSON: every handshake refusal (not an upgrade,
// a wrong version, a bad key, two Origin headers) is the project's JSON
// shape with the status coder/websocket gave, and registers nothing.
func TestHandshakeRefusalsAreJSON(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	for _, tc := range []struct {
		name   string
		hdr    map[string][]string
		status int
		code   string
		inMsg  string
	}{
		{"no upgrade", map[string][]string{"Upgrade": nil, "Connection": nil}, 426, ws.CodeUpgradeRequired, "not a WebSocket handshake"},
		{"upgrade to h2c", map[string][]string{"Upgrade": {"h2c"}}, 426, ws.CodeUpgradeRequired, `"h2c"`},
		{"version 8", map[string][]string{"Sec-WebSocket-Version": {"8"}}, 400, ws.CodeUnsupportedVersion, `"8"`},
		{"no version", map[string][]string{"Sec-WebSocket-Version": nil}, 400, ws.CodeUnsupportedVersion, "only 13"},
		{"no key", map[string][]string{"Sec-WebSocket-Key": nil}, 400, ws.CodeInvalidHandshake, "missing Sec-WebSocket-Key"},
		{"short key", map[string][]string{"Sec-WebSocket-Key": {"c2hvcnQ="}}, 400, ws.CodeInvalidHandshake, `"c2hvcnQ="`},
		{"two keys", map[string][]string{"Sec-WebSocket-Key": {"dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZQ=="}}, 400, ws.CodeInvalidHandshake, "2 times"},
		{"two origins", map[string][]string{"Origin": {"http://a.example", "http://b.example"}}, 400, ws.CodeInvalidHandshake, "Origin sent 2 times"},
	} {
		status, hdr, code, msg := handshake(t, s, "", tc.hdr)
		assert.Equal(t, tc.status, status, tc.name)
		assert.Equal(t, tc.code, code, tc.name)
		assert.Contains(t, msg, tc.inMsg, tc.name)
		switch tc.code {
		case ws.CodeUnsupportedVersion:
			assert.Equal(t, "13", hdr.Get("Sec-WebSocket-Version"), tc.name)
		case ws.CodeUpgradeRequired:
			assert.Equal(t, "websocket", hdr.Get("Upgrade"), tc.name)
		}
	}
	assert.Zero(t, s.bus.Stats().Subscribers)
	assert.Zero(t, s.h.Stats().Started)
	assert.EqualValues(t, 8, s.h.Stats().Rejected)
}

// TestMisspelledQueryParameterOverWebSocket: the WebSocket handler shares
// the SSE endpoint's query rules: ?lastEventID= is refused before the
// upgrade, naming lastEventId; unrelated parameters pass; Query.Strict
// refuses them too.
func TestMisspelledQueryParameterOverWebSocket(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	publish(t, s.bus, "s1", 3)
	status, _, code, msg := handshake(t, s, "lastEventID=1", nil)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, resume.CodeUnknownParameter, code)
	assert.Contains(t, msg, "did you mean lastEventId?")

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.url("s1", "token=abc&lastEventId=1"), nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), read(t, c).ID)
	_ = c.CloseNow()

	strict := newServer(t, eventbus.Options{}, ws.HandlerOptions{Query: resume.QueryRules{Strict: true}})
	require.NoError(t, strict.bus.CreateSession("s1", ""))
	status, _, code, msg = handshake(t, strict, "token=abc", nil)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, resume.CodeUnknownParameter, code)
	assert.Contains(t, msg, `"token"`)
	assert.Zero(t, strict.bus.Stats().Subscribers)
}

// TestNewHandlerRefusesBadOriginPattern: a malformed OriginPatterns entry
// made coder/websocket log and refuse every cross-origin request at run
// time; NewHandler now names it.
func TestNewHandlerRefusesBadOriginPattern(t *testing.T) {
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer b.Close()
	_, err = ws.NewHandler(b, ws.HandlerOptions{Accept: &websocket.AcceptOptions{OriginPatterns: []string{"ok.example", "[bad"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"[bad"`)
}

// TestNewHandlerRefusesBadOverflowPolicy: a misspelt or refused
// HandlerOptions.OverflowPolicy is the server's mistake, named by
// NewHandler (errors.Is eventbus.ErrInvalid) — not a 400 invalid_argument
// blamed on every client that connects.
func TestNewHandlerRefusesBadOverflowPolicy(t *testing.T) {
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer b.Close()
	for _, p := range []eventbus.OverflowPolicy{"drop-oldest", "block", "DropOldest"} {
		_, err := ws.NewHandler(b, ws.HandlerOptions{OverflowPolicy: p})
		require.ErrorIs(t, err, eventbus.ErrInvalid, p)
		assert.Contains(t, err.Error(), "OverflowPolicy", p)
		assert.Contains(t, err.Error(), string(p))
	}
	for _, p := range []eventbus.OverflowPolicy{"", eventbus.DropSubscriber, eventbus.DropOldest, eventbus.DropNewest} {
		h, err := ws.NewHandler(b, ws.HandlerOptions{OverflowPolicy: p})
		require.NoError(t, err, p)
		_ = h.Close()
	}
}
