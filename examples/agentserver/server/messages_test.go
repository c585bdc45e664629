package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/agent"
)

// turnBus is the bus of the servers whose turns turnEvents reads: its ring
// holds a whole turn of "stream 2000" (2,004 records), so that the read,
// which starts after the POST returned, misses nothing however far the
// reply ran ahead meanwhile (with the default ring of 100, a loaded machine
// evicted the turn's start first).
var turnBus = eventbus.Options{ReplayBufferSize: 10_000}

// turnEvents posts text to session and returns the events of the turn it
// starts, between its turn_start and its turn_end (both excluded), and the
// turn_end; it waits for the end. A gap (any frame but replay_complete)
// fails the test.
func turnEvents(t *testing.T, s *Server, session, text string) ([]eventbus.Event, eventbus.Event) {
	t.Helper()
	code, _, body := do(t, s, http.MethodPost, "/session/"+session+"/messages", `{"text":`+jsonString(text)+`}`)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	turn := body["turn"].(string)
	start := uint64(body["startId"].(float64))
	assert.Equal(t, s.answer(start-1, false).Cursor, body["cursor"], "the cursor reads the turn from its start")
	sub, err := s.Bus().Subscribe(context.Background(), session, eventbus.SubscribeOptions{Cursor: eventbus.At(start - 1), MaxQueued: 1_000_000})
	require.NoError(t, err)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var evs []eventbus.Event
	for {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		switch {
		case ev.ID == 0:
			require.Equal(t, frame.TypeReplayComplete, ev.Type, "a gap in the turn: %s", ev.Data)
		case ev.Type == frame.TypeTurnStart:
			assert.JSONEq(t, `{"turn":"`+turn+`","session":"`+session+`"}`, string(ev.Data))
		case ev.Type == frame.TypeTurnEnd:
			return evs, ev
		default:
			evs = append(evs, ev)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The model's reply is deterministic for the text: in a session the same
// text publishes the same events, byte for byte; another text another
// reply.
func TestMessageReplyIsDeterministic(t *testing.T) {
	t.Parallel()
	s := newServerBus(t, turnBus, Options{AgentRate: agent.MaxStream})
	require.NoError(t, s.Bus().CreateSession("s", ""))
	const text = "Why does the nightly export write an empty file?"
	first, end := turnEvents(t, s, "s", text)
	assert.JSONEq(t, `{"turn":`+jsonString(turnOf(t, end))+`,"reason":"complete"}`, string(end.Data))
	second, _ := turnEvents(t, s, "s", text)
	require.Len(t, second, len(first))
	for i := range first {
		assert.Equal(t, first[i].Type, second[i].Type, "event %d", i)
		assert.Equal(t, string(first[i].Data), string(second[i].Data), "event %d, byte for byte", i)
	}
	kinds := map[string]int{}
	for _, ev := range first {
		kinds[ev.Type]++
	}
	assert.Equal(t, 1, kinds[acp.TypeUserMessageChunk])
	assert.Positive(t, kinds[acp.TypeThoughtChunk])
	assert.Equal(t, 1, kinds[acp.TypeToolCall])
	assert.Equal(t, 2, kinds[acp.TypeToolCallUpdate])
	assert.Positive(t, kinds[acp.TypeMessageChunk])

	other, _ := turnEvents(t, s, "s", "Add a retry to the webhook sender")
	assert.NotEqual(t, string(first[1].Data), string(other[1].Data), "another text, another reply")
}

func turnOf(t *testing.T, ev eventbus.Event) string {
	t.Helper()
	var d frame.TurnData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	return d.Turn
}

// "stream N" publishes exactly N agent_message_chunk text deltas (ACP
// shapes), then one tool call with its result, and ends the turn.
func TestStreamNGivesNDeltasThenOneToolCall(t *testing.T) {
	t.Parallel()
	s := newServerBus(t, turnBus, Options{AgentRate: agent.MaxStream})
	require.NoError(t, s.Bus().CreateSession("s", ""))
	for _, n := range []int{1, 7, 2000} {
		evs, end := turnEvents(t, s, "s", fmt.Sprintf("stream %d", n))
		require.Len(t, evs, n+2, "stream %d", n)
		for i, ev := range evs[:n] {
			require.Equal(t, acp.TypeMessageChunk, ev.Type, "event %d", i)
			u, err := acp.Parse(ev.Data)
			require.NoError(t, err)
			c, ok := u.Update.(acp.ContentChunk)
			require.True(t, ok, "%T", u.Update)
			require.Equal(t, "text", c.Content.Type)
			require.NotEmpty(t, c.Content.Text)
			require.Equal(t, "s", u.SessionID)
		}
		assert.Equal(t, acp.TypeToolCall, evs[n].Type)
		assert.Equal(t, acp.TypeToolCallUpdate, evs[n+1].Type)
		assert.Contains(t, string(evs[n+1].Data), `"status":"completed"`)
		assert.Contains(t, string(evs[n+1].Data), fmt.Sprintf("streamed %d chunks", n))
		assert.Contains(t, string(end.Data), `"reason":"complete"`)
	}
	r, err := agent.Plan("stream 100000")
	require.NoError(t, err)
	assert.Equal(t, agent.MaxStream+2, r.Len(), "the bound itself is accepted")
}

// A message while a turn runs is 409 turn_active naming it; the stop
// button (POST /session/{id}/cancel) ends the turn at once — the reply's
// goroutine publishes nothing after its turn_end — and a new message is
// then taken. The presence route shows the status the model sets.
func TestMessageWhileATurnRunsAndItsCancel(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{AgentRate: 200})
	require.NoError(t, s.Bus().CreateSession("s", ""))
	code, _, body := do(t, s, http.MethodPost, "/session/s/messages", `{"text":"stream 100000","turn":"long"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	assert.Equal(t, "long", body["turn"])

	code, _, body = do(t, s, http.MethodPost, "/session/s/messages", `{"text":"hello"}`)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "turn_active", body["code"])
	assert.Contains(t, body["message"], `turn "long"`)

	require.Eventually(t, func() bool {
		_, _, p := do(t, s, http.MethodGet, "/session/s/presence", "")
		return p["status"] == agent.StatusStreaming && p["turn"] == "long"
	}, 20*time.Second, time.Millisecond, "the model sets its status")
	code, _, body = do(t, s, http.MethodGet, "/session/s/turn", "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "long", body["turn"])
	assert.Equal(t, agent.StatusStreaming, body["status"])

	code, _, body = do(t, s, http.MethodPost, "/session/s/cancel", "")
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	assert.Equal(t, []any{"long"}, body["cancelled"])
	info, ok := s.Bus().Turn("s", "long")
	require.True(t, ok)
	assert.Equal(t, frame.ReasonCancelled, info.Reason)
	s.agents.wg.Wait() // the reply returned
	assert.Equal(t, info.EndID, s.Bus().LastEventID(), "nothing of the turn after its turn_end")
	code, _, _ = do(t, s, http.MethodGet, "/session/s/turn", "")
	assert.Equal(t, http.StatusNoContent, code)
	_, _, p := do(t, s, http.MethodGet, "/session/s/presence", "")
	assert.Equal(t, "idle", p["status"])

	code, _, body = do(t, s, http.MethodPost, "/session/s/messages", `{"text":"stream 1"}`)
	assert.Equal(t, http.StatusAccepted, code, "%v", body)
}

// Every refusal of the model's routes names the value and writes nothing.
func TestModelRoutesRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{AgentRate: agent.MaxStream})
	require.NoError(t, s.Bus().CreateSession("s", ""))
	require.NoError(t, s.Bus().CreateSession("closed", ""))
	require.NoError(t, s.Bus().CloseSession("closed"))
	tr, err := s.Bus().StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "used"})
	require.NoError(t, err)
	_, err = tr.End(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, message      string
	}{
		{"POST", "/session/s/messages", `{}`, 400, "invalid_argument", "empty text"},
		{"POST", "/session/s/messages", `{"text":"  "}`, 400, "invalid_argument", "empty text"},
		{"POST", "/session/s/messages", `{"text":"` + strings.Repeat("a", agent.MaxText+1) + `"}`, 400, "invalid_argument", "text of 16385 bytes is over 16384"},
		{"POST", "/session/s/messages", `{"text":"stream 0"}`, 400, "invalid_argument", `stream count "0" (want a number from 1 to 100000)`},
		{"POST", "/session/s/messages", `{"text":"stream 100001"}`, 400, "invalid_argument", `stream count "100001"`},
		{"POST", "/session/s/messages", `{"text":"stream many"}`, 400, "invalid_argument", `stream count "many"`},
		{"POST", "/session/s/messages", `{"text":"hi","turn":"a\nb"}`, 400, "invalid_turn_id", `turn id "a\nb" contains control character`},
		{"POST", "/session/s/messages", `{"text":"hi","turn":"used"}`, 409, "turn_ended", `turn "used"`},
		{"POST", "/session/s/messages", `{"text":"hi","Text":"x"}`, 400, "invalid_json", ""},
		{"POST", "/session/nobody/messages", `{"text":"hi"}`, 404, "session_not_found", `session "nobody" not found`},
		{"POST", "/session/closed/messages", `{"text":"hi"}`, 410, "session_closed", `session "closed" closed`},
		{"POST", "/session/s/messages?x=1", `{"text":"hi"}`, 400, "unknown_query_parameter", `"x"`},
		{"PUT", "/session/s/status", `{"status":"` + strings.Repeat("s", 65) + `"}`, 400, "invalid_argument", "is 65 bytes (want 1 to 64)"},
		{"PUT", "/session/s/status", `{"status":"deep thought"}`, 400, "invalid_argument", `status "deep thought": character ' '`},
		{"PUT", "/session/s/status", `{}`, 400, "invalid_argument", "is 0 bytes"},
		{"PUT", "/session/nobody/status", `{"status":"thinking"}`, 404, "session_not_found", `"nobody"`},
		{"PUT", "/session/closed/status", `{"status":"thinking"}`, 410, "session_closed", `"closed"`},
		{"POST", "/session/s/cancel?cascade=1", `{}`, 400, "unknown_query_parameter", `"cascade"`},
		{"POST", "/session/s/cancel", `{"turn":"used"}`, 409, "turn_ended", `turn "used"`},
		{"POST", "/session/s/cancel", `{"turn":""}`, 400, "invalid_turn_id", "empty turn id"},
		{"POST", "/session/nobody/cancel", `{}`, 404, "session_not_found", `"nobody"`},
		{"POST", "/session/closed/cancel", `{}`, 410, "session_closed", `"closed"`},
		{"GET", "/session/closed/turn", ``, 410, "session_closed", `"closed"`},
		{"GET", "/session/nobody/presence", ``, 404, "session_not_found", `"nobody"`},
	} {
		before := s.Bus().LastEventID()
		code, _, body := do(t, s, tc.method, tc.path, tc.body)
		assert.Equal(t, tc.status, code, "%s %s %.60s: %v", tc.method, tc.path, tc.body, body)
		assert.Equal(t, tc.code, body["code"], "%s %s %.60s", tc.method, tc.path, tc.body)
		assert.Contains(t, body["message"], tc.message, "%s %s %.60s", tc.method, tc.path, tc.body)
		assert.Equal(t, before, s.Bus().LastEventID(), "%s %s: nothing written", tc.method, tc.path)
	}
	code, _, _ := do(t, s, http.MethodPut, "/session/s/status", `{"status":"awaiting_input"}`)
	assert.Equal(t, http.StatusNoContent, code)
	p, err := s.Bus().Presence("s")
	require.NoError(t, err)
	assert.Equal(t, "awaiting_input", p.Status)
}

// StopAgents ends every reply's turn (cancelled, saying why), refuses new
// messages with 503, and returns once the replies have.
func TestStopAgentsEndsTheTurns(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{AgentRate: 10})
	require.NoError(t, s.Bus().CreateSession("s", ""))
	code, _, body := do(t, s, http.MethodPost, "/session/s/messages", `{"text":"stream 100000"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.StopAgents(ctx))
	info, ok := s.Bus().Turn("s", body["turn"].(string))
	require.True(t, ok)
	assert.Equal(t, frame.ReasonCancelled, info.Reason)
	assert.Equal(t, "agentserver: shutting down", info.Message)
	code, _, body = do(t, s, http.MethodPost, "/session/s/messages", `{"text":"hi"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable", body["code"])
}
