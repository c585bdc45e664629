package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// envelope is a frame's JSON envelope as a client reads it.
type envelope struct {
	ID      uint64          `json:"id"`
	Type    string          `json:"type"`
	Session string          `json:"session"`
	Data    json.RawMessage `json:"data"`
}

// The npm eventsource package watches a session with ?client=&presence=1:
// it gets the presence snapshot first (itself attached), the turn_start of
// the model's turn it started, and — after its fetch of POST
// /session/{id}/cancel answered 202 naming the turn — the turn_end
// {"reason":"cancelled"}, with nothing of the turn after it.
func TestNodeEventSourceSeesTheCancelledTurn(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}
	ts := startServer(t, eventbus.Options{}, server.Options{AgentRate: 200})
	require.NoError(t, ts.bus.CreateSession("chat", ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "turns.mjs", ts.ts.URL, "chat", "node-1", "30000")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s; stdout: %s", &stderr, &stdout)
	var res struct {
		Presence []frame.PresenceData
		Start    envelope
		Cancel   struct {
			Status int
			Body   eventbus.CancelResult
		}
		End   envelope
		After []string
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "stdout: %s", &stdout)

	require.NotEmpty(t, res.Presence)
	assert.Equal(t, frame.PresenceData{Session: "chat", Clients: 1, Status: "idle"}, res.Presence[0], "the snapshot: itself attached")
	var start, end frame.TurnData
	require.NoError(t, json.Unmarshal(res.Start.Data, &start))
	require.NoError(t, json.Unmarshal(res.End.Data, &end))
	assert.Equal(t, frame.TypeTurnStart, res.Start.Type)
	assert.Equal(t, "chat", start.Session)
	assert.Equal(t, 202, res.Cancel.Status)
	assert.Equal(t, []string{start.Turn}, res.Cancel.Body.Cancelled)
	assert.Equal(t, frame.TurnData{Turn: start.Turn, Reason: frame.ReasonCancelled}, end)
	assert.Greater(t, res.End.ID, res.Start.ID)
	assert.Empty(t, res.After, "nothing of the turn after its turn_end")
	info, ok := ts.bus.Turn("chat", start.Turn)
	require.True(t, ok)
	assert.Equal(t, res.End.ID, info.EndID)
}

// The page's turn bar in Chromium, over SSE and over WebSocket: a message
// starts the model's turn, the bar shows it with the agent status and the
// clients watching (the page itself), and Stop — a cascading cancel, a
// POST over SSE, the cancel message over WebSocket — ends the turn and a
// sub-agent's, after which the bar shows idle.
func TestChromiumPageStopButton(t *testing.T) {
	for _, transport := range []string{"sse", "ws"} {
		t.Run(transport, func(t *testing.T) { chromiumStopButton(t, transport) })
	}
}

func chromiumStopButton(t *testing.T, transport string) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	// The model streams 10 deltas a second: the turn is streaming when Stop
	// is clicked, and a page on a loaded machine keeps up (at 100 a second
	// it fell behind, and the cancel's answer, the turn_end and the
	// presence frames queued behind the deltas for longer than the waits).
	ts := startServer(t, eventbus.Options{}, server.Options{DefaultSession: "chat", AgentRate: 10})
	require.NoError(t, ts.bus.CreateSession("chat", ""))
	require.NoError(t, ts.bus.CreateSession("chat.sub", "chat"))
	sub, err := ts.bus.StartTurn(context.Background(), "chat.sub", eventbus.TurnOptions{ID: "sub-turn"})
	require.NoError(t, err)

	ctx, closeBrowser := browserTab(t, chromium, 60*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/?transport="+transport)))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.presence !== null && window.presence.clients === 1`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "page: %s", pageState(ctx))
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("stop").disabled`))
	require.NoError(t, err)
	assert.True(t, disabled, "nothing to stop yet")

	_, err = chromedp.Run(ctx, chromedp.Evaluate[any](`document.getElementById("message-text").value = "stream 100000";
		document.getElementById("message-form").requestSubmit()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`!!(window.presence && window.presence.turn && window.presence.status === "streaming")
		&& !document.getElementById("stop").disabled && document.getElementById("agent-status").textContent === "streaming"`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "page: %s", pageState(ctx))
	turn, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.presence.turn`))
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("stop"))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.stopAnswers.length === 1 && window.turnEnds.some(e => e.reason === "cancelled")
		&& window.presence.status === "idle" && !window.presence.turn`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "page: %s", pageState(ctx))
	var answer struct {
		Via       string
		Status    int
		Cancelled []string
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.stopAnswers[0])`))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(raw), &answer))
	wantVia := map[string]string{"sse": "http", "ws": "ws"}[transport]
	assert.Equal(t, wantVia, answer.Via)
	assert.Equal(t, 202, answer.Status)
	assert.ElementsMatch(t, []string{turn, "sub-turn"}, answer.Cancelled, "the cascade stops the sub-agent too")
	select {
	case <-sub.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sub-agent's producer was not cancelled")
	}
	require.NoError(t, afterRender(ctx))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.getElementById("agent-status").textContent,
		document.getElementById("turn-id").textContent, String(document.getElementById("stop").disabled)]`))
	require.NoError(t, err)
	assert.Equal(t, []string{"idle", "–", "true"}, shown)
}
