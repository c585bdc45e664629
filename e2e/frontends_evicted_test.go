package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// A turn whose first events have left the replay buffer (a buffer of 8,
// a turn of 40 deltas) is refused to every frontend client — npm ai's
// reconnectToStream throws the 410 ring_evicted answer, @ag-ui/client's
// HttpAgent resuming with Last-Event-ID rejects with it, @a2a-js/sdk's
// resubscribeTask throws the JSON-RPC error -32004 — and none is given the
// turn from its middle (text deltas without their start).
func TestFrontendClientsAreRefusedATurnWhoseStartWasEvicted(t *testing.T) {
	node, dir := needFrontends(t)
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 8})
	require.NoError(t, err)
	defer bus.Close()
	start := func(*http.Request) (string, error) { return "", eventbus.ErrTurnActive }
	ai, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{Start: func(r *http.Request, _ aisdk.Message) (string, error) { return start(r) }})
	require.NoError(t, err)
	ag, err := agui.NewHandler(bus, agui.HandlerOptions{Start: func(r *http.Request, _ agui.Input) (string, error) { return start(r) }})
	require.NoError(t, err)
	aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(r *http.Request, _ a2a.Message) (string, error) { return start(r) }})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/chat/", ai)
	mux.Handle("/agui", ag)
	mux.Handle("/a2a", aa)
	mux.Handle("GET "+a2a.CardPath, a2a.CardHandler(a2a.Card{Name: "e2e", Description: "evicted", Version: "1", URL: "/a2a",
		Skills: []a2a.Skill{{ID: "chat", Name: "Chat", Description: "replies"}}}))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	require.NoError(t, bus.CreateSession("c1", ""))
	tn, err := bus.StartTurn(context.Background(), "c1", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	var last eventbus.Event
	for i := range 40 {
		n := acp.Notification{SessionID: "c1", Update: acp.MessageChunk(string(rune('a' + i%26)))}
		last, err = tn.Publish(n.Type(), n)
		require.NoError(t, err)
	}
	defer func() { _, _ = tn.End(nil) }()

	var out struct {
		AISDK struct {
			Error  string
			Chunks []map[string]any
		}
		AGUI struct {
			Error  string
			Events []string
		}
		A2A struct {
			Error  string
			Events []string
		}
	}
	cursor := resume.FormatID(last.ID-20, bus.Epoch()) // inside the turn, its next events still held
	runNode(t, node, dir, &out, "evicted.mjs", ts.URL, "c1", cursor, a2a.TaskID("c1", "t1"))
	assert.Contains(t, out.AISDK.Error, `"code":"ring_evicted"`, "reconnectToStream: %+v", out.AISDK)
	assert.Empty(t, out.AISDK.Chunks, "no chunk of the turn's middle")
	assert.Contains(t, out.AGUI.Error, "410", "runAgent: %+v", out.AGUI)
	assert.Contains(t, out.AGUI.Error, "ring_evicted")
	assert.Empty(t, out.AGUI.Events)
	assert.Contains(t, out.A2A.Error, "UnsupportedOperation", "resubscribeTask: %+v", out.A2A)
	assert.Contains(t, out.A2A.Error, "replay buffer")
	assert.Empty(t, out.A2A.Events)
}
