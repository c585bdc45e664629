package agui_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
)

func sayIn(t *testing.T, tn *eventbus.Turn, s string) {
	t.Helper()
	n := acp.Notification{SessionID: tn.Start().Session, Update: acp.MessageChunk(s)}
	_, err := tn.Publish(n.Type(), n)
	require.NoError(t, err)
}

// A Last-Event-ID past the bus's last id (forged, or from a future the
// bus never reached) is no position in the running run: 410 epoch_reset,
// never the thread's whole history replayed into the run. The bus answers such a
// cursor with epoch_reset and the whole history; the tail read took that
// history as the run's, so an earlier run's text came out as this one's.
func TestAResumeFromBeyondTheLastIDReplaysNoOtherRun(t *testing.T) {
	t.Parallel()
	started := 0
	bus, ts := newAGUIServer(t, &started)
	require.NoError(t, bus.CreateSession("t", ""))
	old, err := bus.StartTurn(context.Background(), "t", eventbus.TurnOptions{ID: "old"})
	require.NoError(t, err)
	sayIn(t, old, "OLDTEXT")
	_, err = old.End(nil)
	require.NoError(t, err)
	cur, err := bus.StartTurn(context.Background(), "t", eventbus.TurnOptions{ID: "cur"})
	require.NoError(t, err)
	defer cur.End(nil)
	sayIn(t, cur, "NEWTEXT")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/agui/t/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", bus.Epoch()+"-999999")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body) // until the timeout: the run is live
	assert.NotContains(t, string(body), "OLDTEXT", "status %d: %s", resp.StatusCode, body)
	assert.Equal(t, http.StatusGone, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `"code":"epoch_reset"`)
}
