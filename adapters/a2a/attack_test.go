package a2a_test

import (
	"context"
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
