package agui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

func newAGUIServer(t *testing.T, started *int) (*eventbus.Bus, *httptest.Server) {
	t.Helper()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1024, ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	h, err := agui.NewHandler(bus, agui.HandlerOptions{Start: func(r *http.Request, in agui.Input) (string, error) {
		*started++
		tn, err := bus.StartTurn(context.Background(), in.Thread, eventbus.TurnOptions{ID: in.Run})
		if err != nil {
			return "", err
		}
		return tn.ID(), nil
	}})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		_ = bus.Close()
	})
	return bus, ts
}

// Bad input is a clear 4xx naming the bad value; nothing reaches the bus.
func TestBadRunInputsPublishNothing(t *testing.T) {
	t.Parallel()
	started := 0
	bus, ts := newAGUIServer(t, &started)
	require.NoError(t, bus.CreateSession("busy", ""))
	_, err := bus.StartTurn(context.Background(), "busy", eventbus.TurnOptions{ID: "running"})
	require.NoError(t, err)
	msg := `"messages":[{"id":"u","role":"user","content":"hi"}]`
	rows := []struct {
		name, body, lastID string
		status             int
		code, says         string
	}{
		{"not JSON", `{`, "", 400, "invalid_json", "not JSON"},
		{"no thread", `{"runId":"r",` + msg + `}`, "", 400, "invalid_json", `"threadId"`},
		{"no run", `{"threadId":"t",` + msg + `}`, "", 400, "invalid_json", `"runId"`},
		{"no messages", `{"threadId":"t","runId":"r","messages":[]}`, "", 400, "invalid_json", `"messages"`},
		{"messages not an array", `{"threadId":"t","runId":"r","messages":"x"}`, "", 400, "invalid_json", "RunAgentInput"},
		{"last not the user's", `{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","content":"x"}]}`, "", 400, "invalid_json", "assistant"},
		{"content not text", `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":5}]}`, "", 400, "invalid_json", "messages[0].content"},
		{"thread the bus refuses", `{"threadId":"a\u0001","runId":"r",` + msg + `}`, "", 400, "invalid_session_id", "control character"},
		// GET {path}/./stream is GET {path}/stream once a client's URL
		// parser has read it: such a run could never be joined.
		{"thread a dot segment", `{"threadId":".","runId":"r",` + msg + `}`, "", 400, "invalid_session_id", "dot segment"},
		{"thread two dots", `{"threadId":"..","runId":"r",` + msg + `}`, "", 400, "invalid_session_id", "dot segment"},
		{"run id the bus refuses", `{"threadId":"t","runId":"",` + msg + `}`, "", 400, "invalid_turn_id", "empty run id"},
		{"run id with a control character", `{"threadId":"t","runId":"r<&>\u0001",` + msg + `}`, "", 400, "invalid_turn_id", `run id "r<&>\x01" contains control character`},
		{"run id too long", `{"threadId":"t","runId":"` + strings.Repeat("r", 300) + `",` + msg + `}`, "", 400, "invalid_turn_id", `run id "rrrr`},
		{"a run is active", `{"threadId":"busy","runId":"r",` + msg + `}`, "", 409, "turn_active", `"running"`},
		{"bad Last-Event-ID", `{"threadId":"busy","runId":"r",` + msg + `}`, "x-y:z", 400, "invalid_last_event_id", `"x-y:z"`},
	}
	before := bus.LastEventID()
	for _, r := range rows {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/agui", strings.NewReader(r.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if r.lastID != "" {
			req.Header.Set("Last-Event-ID", r.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), r.name)
		resp.Body.Close()
		assert.Equal(t, r.status, resp.StatusCode, r.name)
		assert.Equal(t, r.code, e.Code, r.name)
		assert.Contains(t, e.Message, r.says, r.name)
	}
	assert.Equal(t, before, bus.LastEventID(), "nothing published")
	assert.False(t, bus.SessionExists("t"), "no session created")
	assert.Zero(t, started, "Start not called")
}

// A join or resume of a thread without a run is 204.
func TestStreamWithoutARunIs204(t *testing.T) {
	t.Parallel()
	started := 0
	bus, ts := newAGUIServer(t, &started)
	require.NoError(t, bus.CreateSession("idle", ""))
	for _, path := range []string{"/agui/never-seen/stream", "/agui/idle/stream"} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, path)
	}
}

// A run id used before is 409 turn_ended while the thread's replay buffer
// holds that run — 40 runs later too, not only among the 32 newest — so a
// run id never names two runs a resume could find.
func TestARunIDUsedBeforeIsRefusedWhileTheBufferHoldsIt(t *testing.T) {
	t.Parallel()
	started := 0
	bus, ts := newAGUIServer(t, &started)
	require.NoError(t, bus.CreateSession("t", ""))
	for i := range 40 {
		tn, err := bus.StartTurn(context.Background(), "t", eventbus.TurnOptions{ID: fmt.Sprint("r", i)})
		require.NoError(t, err)
		_, err = tn.End(nil)
		require.NoError(t, err)
	}
	for _, run := range []string{"r0", "r7", "r39"} {
		before := bus.LastEventID()
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/agui", strings.NewReader(
			`{"threadId":"t","runId":"`+run+`","messages":[{"id":"u","role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), run)
		resp.Body.Close()
		assert.Equal(t, http.StatusConflict, resp.StatusCode, run)
		assert.Equal(t, "turn_ended", e.Code, run)
		assert.Contains(t, e.Message, `"`+run+`"`, run)
		assert.Equal(t, before, bus.LastEventID(), "%s: nothing written", run)
	}
}
