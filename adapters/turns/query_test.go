package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// GET /session/{id}/turn answers the active turn with the cursor from which
// a stream reads it from its start, and 204 once it has ended.
func TestTurnAnswersTheActiveTurn(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		b := newBus(t)
		require.NoError(t, b.CreateSession("s", ""))
		_, err := b.Publish("s", "note", nil)
		require.NoError(t, err)
		_, srv := serve(t, b, turns.HandlerOptions{PlainIDs: plain})

		a := do(t, http.MethodGet, srv.URL+"/session/s/turn", "", nil)
		assert.Equal(t, http.StatusNoContent, a.status, "no turn yet")
		assert.Empty(t, a.body)

		tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
		require.NoError(t, err)
		require.NoError(t, tr.SetStatus("thinking"))
		a = do(t, http.MethodGet, srv.URL+"/session/s/turn", "", nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		cursor := b.Epoch() + "-1"
		if plain {
			cursor = "1"
		}
		assert.JSONEq(t, `{"turn":"t1","session":"s","status":"thinking","startId":2,"cursor":"`+cursor+`","epoch":"`+b.Epoch()+`"}`, a.body)
		assert.Equal(t, "no-store", a.header.Get("Cache-Control"))

		_, err = tr.End(nil)
		require.NoError(t, err)
		a = do(t, http.MethodGet, srv.URL+"/session/s/turn", "", nil)
		assert.Equal(t, http.StatusNoContent, a.status, "the turn has ended")
	}
}

// GET /session/{id}/presence counts the clients attached, by client id and
// anonymous, with the agent status and the active turn.
func TestPresenceAnswersClientsAndStatus(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	require.NoError(t, b.CreateSession("s", ""))
	_, srv := serve(t, b, turns.HandlerOptions{})

	a := do(t, http.MethodGet, srv.URL+"/session/s/presence", "", nil)
	require.Equal(t, http.StatusOK, a.status, a.body)
	assert.JSONEq(t, `{"session":"s","clients":0,"status":"idle"}`, a.body)

	for _, c := range []string{"tab-1", "tab-1", "tab-2", ""} {
		sub, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: c})
		require.NoError(t, err)
		defer sub.Close()
	}
	_, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	require.NoError(t, b.SetStatus("s", "streaming"))
	a = do(t, http.MethodGet, srv.URL+"/session/s/presence", "", nil)
	require.Equal(t, http.StatusOK, a.status, a.body)
	var p struct {
		Clients int
		Status  string
		Turn    string
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &p))
	assert.Equal(t, 3, p.Clients, "two client ids and one anonymous subscriber")
	assert.Equal(t, "streaming", p.Status)
	assert.Equal(t, "t1", p.Turn)
}

// The read routes answer an unknown or closed session as the stream routes
// do, and pass the stream handlers' Authorize hook (scope session).
func TestReadRoutesRefusals(t *testing.T) {
	t.Parallel()
	for _, route := range []string{"turn", "presence"} {
		b := newBus(t)
		require.NoError(t, b.CreateSession("closed", ""))
		require.NoError(t, b.CloseSession("closed"))
		require.NoError(t, b.CreateSession("private", ""))
		var sc []scope.Kind
		_, srv := serve(t, b, turns.HandlerOptions{Authorize: func(_ *http.Request, session string, k scope.Kind) error {
			sc = append(sc, k)
			if session == "private" {
				return errors.New("not yours")
			}
			return nil
		}})
		for _, tc := range []struct {
			session, method string
			status          int
			code, message   string
		}{
			{"nobody", http.MethodGet, 404, resume.CodeSessionNotFound, `session "nobody" not found`},
			{"closed", http.MethodGet, 410, resume.CodeSessionClosed, `session "closed" closed`},
			{"private", http.MethodGet, 403, resume.CodeForbidden, "not yours"},
			{"closed", http.MethodPost, 405, resume.CodeMethodNotAllowed, "method POST not allowed"},
		} {
			a := do(t, tc.method, srv.URL+"/session/"+tc.session+"/"+route, "", nil)
			assert.Equal(t, tc.status, a.status, "%s %s: %s", route, tc.session, a.body)
			if tc.method == http.MethodPost {
				continue // the mux answers a method its pattern does not take
			}
			code, msg := a.code(t)
			assert.Equal(t, tc.code, code, route)
			assert.Contains(t, msg, tc.message, route)
		}
		for _, k := range sc {
			assert.Equal(t, scope.Session, k)
		}
	}
}
