package aisdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// chatServer serves an aisdk.Handler whose Start starts a turn and hands
// it to the test, which publishes into it.
type chatServer struct {
	bus   *eventbus.Bus
	ts    *httptest.Server
	turns chan *eventbus.Turn
	texts chan string
}

func newChatServer(t *testing.T) *chatServer {
	t.Helper()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 4096, ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	cs := &chatServer{bus: bus, turns: make(chan *eventbus.Turn, 4), texts: make(chan string, 4)}
	h, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{Start: func(r *http.Request, m aisdk.Message) (string, error) {
		tn, err := bus.StartTurn(context.Background(), m.Chat, eventbus.TurnOptions{})
		if err != nil {
			return "", err
		}
		cs.texts <- m.Text
		cs.turns <- tn
		return tn.ID(), nil
	}})
	require.NoError(t, err)
	cs.ts = httptest.NewServer(h)
	t.Cleanup(func() {
		cs.ts.CloseClientConnections()
		cs.ts.Close()
		_ = bus.Close()
	})
	return cs
}

func chatBody(chat, text string) string {
	return fmt.Sprintf(`{"id":%q,"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":%q}]}],"trigger":"submit-message","messageId":null}`, chat, text)
}

// frames reads an SSE body's data lines, calling each for every one until
// it returns false or the body ends.
func frames(t *testing.T, body io.Reader, each func(data string) bool) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && !each(d) {
			return
		}
	}
}

func say(t *testing.T, tn *eventbus.Turn, s string) {
	t.Helper()
	n := acp.Notification{SessionID: tn.Start().Session, Update: acp.MessageChunk(s)}
	_, err := tn.Publish(n.Type(), n)
	require.NoError(t, err)
}

// A POST starts the turn through Start with the user's text, and streams
// it: start (messageId: the turn), the text, finish, [DONE].
func TestPostStreamsTheTurn(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	resp, err := http.Post(cs.ts.URL+"/api/chat", "application/json", strings.NewReader(chatBody("c1", "hi")))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "v1", resp.Header.Get(aisdk.HeaderStream))
	assert.Equal(t, "hi", <-cs.texts)
	tn := <-cs.turns
	say(t, tn, "Hel")
	say(t, tn, "lo")
	_, err = tn.End(nil)
	require.NoError(t, err)
	var got []string
	frames(t, resp.Body, func(d string) bool { got = append(got, d); return true })
	assert.Equal(t, []string{
		`{"type":"start","messageId":"` + tn.ID() + `"}`,
		`{"type":"text-start","id":"text-2"}`,
		`{"type":"text-delta","id":"text-2","delta":"Hel"}`,
		`{"type":"text-delta","id":"text-2","delta":"lo"}`,
		`{"type":"text-end","id":"text-2"}`,
		`{"type":"finish","finishReason":"stop"}`,
		`[DONE]`,
	}, got)
}

// Issue 30: the resume of a 2,000-delta reply is at most 40 SSE frames.
// GET {api}/{chatId}/stream of a turn that has published 2,000 deltas, a
// tool call and its result is the reply so far in one delta; then the
// live rest and the end.
func TestResumeOfA2000DeltaReplyIsAtMost40Frames(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	require.NoError(t, cs.bus.CreateSession("c1", ""))
	tn, err := cs.bus.StartTurn(context.Background(), "c1", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	var want strings.Builder
	for i := range 2000 {
		s := fmt.Sprintf("w%d ", i)
		want.WriteString(s)
		say(t, tn, s)
	}
	for _, u := range []acp.Update{
		acp.ToolCall{ToolCallID: "c1", Title: "ls", Kind: "execute", RawInput: map[string]string{"p": "."}},
		acp.ToolCallUpdate{ToolCallID: "c1", Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent("a.go")}},
	} {
		n := acp.Notification{SessionID: "c1", Update: u}
		_, err := tn.Publish(n.Type(), n)
		require.NoError(t, err)
	}
	resp, err := http.Get(cs.ts.URL + "/api/chat/c1/stream")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var text strings.Builder
	n := 0
	frames(t, resp.Body, func(d string) bool {
		n++
		if d == "[DONE]" {
			return true
		}
		var c struct{ Type, Delta string }
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		text.WriteString(c.Delta)
		if c.Type == "tool-output-available" { // the replay is through: end the turn
			_, err := tn.End(nil)
			require.NoError(t, err)
		}
		return true
	})
	assert.Equal(t, want.String(), text.String())
	assert.LessOrEqual(t, n, 40, "frames of the resume, [DONE] included")
	t.Logf("the resume of a 2,000-delta reply: %d SSE frames", n)
}

// 204 for an unknown chat and for a chat without an active turn.
func TestResumeWithoutATurnIs204(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	require.NoError(t, cs.bus.CreateSession("idle", ""))
	for _, chat := range []string{"never-seen", "idle"} {
		resp, err := http.Get(cs.ts.URL + "/api/chat/" + chat + "/stream")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, chat)
	}
	assert.False(t, cs.bus.SessionExists("never-seen"), "a resume creates nothing")
}

// Bad input is a clear 4xx naming the bad value, and nothing is written
// to the bus: no session created, no event.
func TestBadChatRequestsPublishNothing(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	require.NoError(t, cs.bus.CreateSession("busy", ""))
	_, err := cs.bus.StartTurn(context.Background(), "busy", eventbus.TurnOptions{ID: "running"})
	require.NoError(t, err)
	require.NoError(t, cs.bus.CreateSession("busy ?", ""))
	_, err = cs.bus.StartTurn(context.Background(), "busy ?", eventbus.TurnOptions{ID: "running"})
	require.NoError(t, err)
	require.NoError(t, cs.bus.CreateSession("gone", ""))
	require.NoError(t, cs.bus.CloseSession("gone"))
	rows := []struct {
		name, body string
		status     int
		code, says string
	}{
		{"not JSON", `{"id":`, 400, "invalid_json", "not JSON"},
		{"messages not an array", `{"id":"c","messages":{},"trigger":"submit-message"}`, 400, "invalid_json", "chat request"},
		{"no messages", `{"id":"c","messages":[],"trigger":"submit-message"}`, 400, "invalid_json", `"messages"`},
		{"parts not an array", `{"id":"c","messages":[{"id":"u","role":"user","parts":"x"}],"trigger":"submit-message"}`, 400, "invalid_json", "messages[0]"},
		{"no role", `{"id":"c","messages":[{"id":"u","parts":[]}],"trigger":"submit-message"}`, 400, "invalid_json", "messages[0].role"},
		{"text part without text", `{"id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"text"}]}],"trigger":"submit-message"}`, 400, "invalid_json", "messages[0].parts[0]"},
		{"last not the user's", `{"id":"c","messages":[{"id":"u","role":"assistant","parts":[]}],"trigger":"submit-message"}`, 400, "invalid_json", "assistant"},
		{"bad trigger", `{"id":"c","messages":[{"id":"u","role":"user","parts":[]}],"trigger":"go"}`, 400, "invalid_json", `"go"`},
		{"no id", `{"messages":[{"id":"u","role":"user","parts":[]}],"trigger":"submit-message"}`, 400, "invalid_json", `"id"`},
		{"chat id the bus refuses", `{"id":"a\u0001b","messages":[{"id":"u","role":"user","parts":[]}],"trigger":"submit-message"}`, 400, "invalid_session_id", "control character"},
		// reconnectToStream fetches {api}/./stream, which the client's URL
		// parser makes {api}/stream: such a chat could never be resumed.
		{"chat id a dot segment", chatBody(".", "x"), 400, "invalid_session_id", "dot segment"},
		{"chat id two dots", chatBody("..", "x"), 400, "invalid_session_id", "dot segment"},
		{"a turn runs", chatBody("busy", "x"), 409, "turn_active", `"running"`},
		{"the resume URL it names is escaped", chatBody("busy ?", "x"), 409, "turn_active", "GET /api/chat/busy%20%3F/stream"},
		{"closed chat", chatBody("gone", "x"), 410, "session_closed", `"gone"`},
	}
	before := cs.bus.LastEventID()
	for _, r := range rows {
		resp, err := http.Post(cs.ts.URL+"/api/chat", "application/json", strings.NewReader(r.body))
		require.NoError(t, err)
		var e struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), r.name)
		resp.Body.Close()
		assert.Equal(t, r.status, resp.StatusCode, r.name)
		assert.Equal(t, r.code, e.Code, r.name)
		assert.Contains(t, e.Message, r.says, r.name)
	}
	assert.Equal(t, before, cs.bus.LastEventID(), "nothing published")
	assert.False(t, cs.bus.SessionExists("c"), "no session created")
	assert.Empty(t, cs.turns, "Start not called")
}

// The stop route cancels the chat's turn through the bus: 202 naming it;
// the POST's stream ends with abort, the partial text written before it.
func TestStopEndsTheStreamWithAbort(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	resp, err := http.Post(cs.ts.URL+"/api/chat", "application/json", strings.NewReader(chatBody("c1", "hi")))
	require.NoError(t, err)
	defer resp.Body.Close()
	tn := <-cs.turns
	say(t, tn, "partial")
	var got []string
	frames(t, resp.Body, func(d string) bool {
		got = append(got, d)
		if strings.Contains(d, `"text-delta"`) {
			stop, err := http.Post(cs.ts.URL+"/api/chat/c1/stop", "application/json", nil)
			require.NoError(t, err)
			b, _ := io.ReadAll(stop.Body)
			stop.Body.Close()
			assert.Equal(t, http.StatusAccepted, stop.StatusCode)
			assert.JSONEq(t, `{"cancelled":["`+tn.ID()+`"],"held":[]}`, string(b))
		}
		return true
	})
	require.Len(t, got, 6)
	assert.Equal(t, `{"type":"text-delta","id":"text-2","delta":"partial"}`, got[2])
	assert.Equal(t, []string{`{"type":"text-end","id":"text-2"}`, `{"type":"abort","reason":"cancelled"}`, "[DONE]"}, got[3:])
	select {
	case <-tn.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the producer's context was not cancelled")
	}
	resp2, err := http.Post(cs.ts.URL+"/api/chat/nope/stop", "application/json", nil)
	require.NoError(t, err)
	resp2.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp2.StatusCode, "stop of an unknown chat")
}

// The stop route's refusals name the turn as sent: a turn id the bus
// refuses (400 invalid_turn_id), a turn that has ended (409 turn_ended,
// 40 turns back too, while the buffer holds it); '&', '<', '>' written
// as themselves. Nothing is written.
func TestStopRefusalsNameTheTurn(t *testing.T) {
	t.Parallel()
	cs := newChatServer(t)
	require.NoError(t, cs.bus.CreateSession("c1", ""))
	for i := range 40 {
		tn, err := cs.bus.StartTurn(context.Background(), "c1", eventbus.TurnOptions{ID: fmt.Sprint("t&", i)})
		require.NoError(t, err)
		_, err = tn.End(nil)
		require.NoError(t, err)
	}
	for _, r := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"control character", `{"turn":"a<&>\u0001"}`, 400, "invalid_turn_id", `turn id "a<&>\x01" contains control character`},
		{"empty", `{"turn":""}`, 400, "invalid_turn_id", "empty turn id"},
		{"ended", `{"turn":"t&39"}`, 409, "turn_ended", `turn "t&39" of session "c1"`},
		{"ended 40 turns back", `{"turn":"t&0"}`, 409, "turn_ended", `turn "t&0" of session "c1"`},
	} {
		before := cs.bus.LastEventID()
		resp, err := http.Post(cs.ts.URL+"/api/chat/c1/stop", "application/json", strings.NewReader(r.body))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code, Message string }
		require.NoError(t, json.Unmarshal(b, &e), r.name)
		assert.Equal(t, r.status, resp.StatusCode, r.name)
		assert.Equal(t, r.code, e.Code, r.name)
		assert.Contains(t, e.Message, r.says, r.name)
		assert.NotContains(t, string(b), `\u0026`, r.name)
		assert.Equal(t, before, cs.bus.LastEventID(), "%s: nothing written", r.name)
	}
}
