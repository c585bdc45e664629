package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/eventbus"
)

// taskIDEvent is one event a2a-taskid.mjs reports.
type taskIDEvent struct {
	Case, ID, ContextID, State, Text, Error string
}

// textOfTask is the reply in evs: the task's text, then its updates'.
func textOfTask(evs []taskIDEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Text)
	}
	return b.String()
}

// TestA2AClientFindsATaskWhoseTurnIDHoldsAt: @a2a-js/sdk 1.3.0's client,
// over 1.0 and 0.3, at a task whose turn id holds '@' (run@task_…) in a
// context whose id holds '@' (me@host): the stream names the task by an
// id that resubscribeTask finds — while it runs (the task, working, then
// the rest) and once it is terminal (the task alone, the whole reply) —
// and a task of a turn without '@' is found by its plain id, as before,
// 41 turns after it ended (the session remembers every turn its replay
// buffer holds the end of, not only the 32 newest).
func TestA2AClientFindsATaskWhoseTurnIDHoldsAt(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, err)
	defer bus.Close()
	chunks := []string{"The ", "cursor ", "is ", "kept ", "by ", "the ", "client", "."}
	run := func(tn *eventbus.Turn, pause time.Duration) {
		for _, c := range chunks {
			time.Sleep(pause)
			n := acp.Notification{SessionID: "me@host", Update: acp.MessageChunk(c)}
			if _, err := tn.Publish(n.Type(), n); err != nil {
				return
			}
		}
		_, _ = tn.End(nil)
	}
	aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(_ *http.Request, m a2a.Message) (string, error) {
		tn, err := bus.StartTurn(context.Background(), m.Context, eventbus.TurnOptions{ID: "run@" + m.Turn})
		if err != nil {
			return "", err
		}
		go run(tn, 100*time.Millisecond)
		return tn.ID(), nil
	}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/a2a", aa)
	mux.Handle("GET "+a2a.CardPath, a2a.CardHandler(a2a.Card{Name: "e2e", Description: "task ids", Version: "1", URL: "/a2a",
		Skills: []a2a.Skill{{ID: "chat", Name: "Chat", Description: "replies"}}}))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	require.NoError(t, bus.CreateSession("me@host", ""))
	plain, err := bus.StartTurn(context.Background(), "me@host", eventbus.TurnOptions{ID: "plain"})
	require.NoError(t, err)
	run(plain, 0)
	for i := range 40 { // the plain task is 41 turns back: still in the buffer, so still found
		tn, err := bus.StartTurn(context.Background(), "me@host", eventbus.TurnOptions{ID: fmt.Sprint("later", i)})
		require.NoError(t, err)
		run(tn, 0)
	}
	plainID := a2a.TaskID("me@host", "plain")
	require.Equal(t, "plain@me@host", plainID, "a turn without '@': the id as before")
	whole := strings.Join(chunks, "")

	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			var out struct {
				ProtocolVersion       string
				Stream, During, After []taskIDEvent
				Plain                 []taskIDEvent
				Error                 string
			}
			runNode(t, node, dir, &out, "a2a-taskid.mjs", ts.URL, version, plainID)
			require.Empty(t, out.Error)
			assert.Equal(t, version, out.ProtocolVersion)
			require.NotEmpty(t, out.Stream)
			task := out.Stream[0]
			require.Equal(t, "task", task.Case)
			assert.Equal(t, "me@host", task.ContextID)
			assert.True(t, strings.HasPrefix(task.ID, "@run%40task_") && strings.HasSuffix(task.ID, "@me@host"),
				"the task id of turn run@task_… in me@host: %q", task.ID)
			for name, evs := range map[string][]taskIDEvent{"stream": out.Stream, "during": out.During, "after": out.After} {
				require.NotEmpty(t, evs, name)
				assert.Equal(t, "task", evs[0].Case, "%s: the task first (%+v)", name, evs)
				assert.Equal(t, task.ID, evs[0].ID, "%s: the same task", name)
				for _, e := range evs {
					assert.Empty(t, e.Error, name)
					if e.ID != "" {
						assert.Equal(t, task.ID, e.ID, "%s: every update names the task", name)
					}
				}
				assert.Equal(t, "completed", evs[len(evs)-1].State, "%s: ends completed", name)
				assert.Equal(t, whole, textOfTask(evs), "%s: the whole reply, once", name)
			}
			assert.Equal(t, "working", out.During[0].State, "resubscribed while it ran")
			require.Len(t, out.After, 1, "a terminal task: the task alone")
			require.Len(t, out.Plain, 1, "the plain task, terminal: alone (%+v)", out.Plain)
			assert.Equal(t, plainID, out.Plain[0].ID)
			assert.Equal(t, whole, out.Plain[0].Text)
		})
	}
}
