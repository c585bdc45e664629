package a2a_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/eventbus"
)

// A resubscription to a finished task is that task alone: not the text of
// the tasks that ran after it in the same context (its replay reads on
// past the task's end, to the buffer's end).
func TestResubscribeToAFinishedTaskIsThatTaskAlone(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	h, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(*http.Request, a2a.Message) (string, error) { return "", nil }})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	require.NoError(t, bus.CreateSession("c", ""))
	for _, x := range []struct{ id, text string }{{"one", "FIRSTTEXT"}, {"two", "SECONDTEXT"}} {
		tn, err := bus.StartTurn(context.Background(), "c", eventbus.TurnOptions{ID: x.id})
		require.NoError(t, err)
		n := acp.Notification{SessionID: "c", Update: acp.MessageChunk(x.text)}
		_, err = tn.Publish(n.Type(), n)
		require.NoError(t, err)
		_, err = tn.End(nil)
		require.NoError(t, err)
	}
	resp, err := http.Post(ts.URL, "application/json", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"one@c"}}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), "FIRSTTEXT")
	assert.NotContains(t, string(body), "SECONDTEXT")
}

// A task whose turn id holds '@', in a context whose id holds '@' too:
// the stream names it by its task id, and a resubscription with that id
// finds that task — not another turn nor "not found". A task id written
// before (a turn without '@') still finds its task.
func TestTaskWhoseTurnIDHoldsAt(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	reply := func(session, turn, text string) {
		tn, err := bus.StartTurn(context.Background(), session, eventbus.TurnOptions{ID: turn})
		require.NoError(t, err)
		n := acp.Notification{SessionID: session, Update: acp.MessageChunk(text)}
		_, err = tn.Publish(n.Type(), n)
		require.NoError(t, err)
		_, err = tn.End(nil)
		require.NoError(t, err)
	}
	h, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(_ *http.Request, m a2a.Message) (string, error) {
		tn, err := bus.StartTurn(context.Background(), m.Context, eventbus.TurnOptions{ID: "run@" + m.Turn})
		if err != nil {
			return "", err
		}
		n := acp.Notification{SessionID: m.Context, Update: acp.MessageChunk("ATTEXT")}
		if _, err := tn.Publish(n.Type(), n); err != nil {
			return "", err
		}
		_, err = tn.End(nil)
		return tn.ID(), err
	}})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	post := func(body string) string {
		resp, err := http.Post(ts.URL, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return string(b)
	}
	require.NoError(t, bus.CreateSession("me@host", ""))
	reply("me@host", "plain", "PLAINTEXT") // a turn before, whose id is "plain@me@host"
	stream := post(`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","contextId":"me@host","parts":[{"kind":"text","text":"hi"}]}}}`)
	assert.Contains(t, stream, "ATTEXT")
	evs := logTurns(t, bus, "me@host")
	require.Len(t, evs, 2)
	turn := evs[1].Turn
	require.Contains(t, turn, "@")
	id := a2a.TaskID("me@host", turn)
	assert.Contains(t, stream, `"taskId":"`+id+`"`, "the stream names the task by its id")
	for _, x := range []struct{ id, text, not string }{{id, "ATTEXT", "PLAINTEXT"}, {"plain@me@host", "PLAINTEXT", "ATTEXT"}} {
		body := post(`{"jsonrpc":"2.0","id":2,"method":"tasks/resubscribe","params":{"id":"` + x.id + `"}}`)
		assert.Contains(t, body, x.text, x.id)
		assert.NotContains(t, body, x.not, x.id)
		assert.Contains(t, body, `"completed"`, x.id)
	}
}

type turnData struct{ Turn string }

// logTurns returns the ended turns of session's replay buffer, in order.
func logTurns(t *testing.T, bus *eventbus.Bus, session string) []turnData {
	t.Helper()
	sub, err := bus.Subscribe(context.Background(), session, eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	var out []turnData
	for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
		if ev.Type == "turn_end" {
			var d turnData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}
