package ws_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Stream.Cancel over WebSocket sends the cancel message on the stream's
// connection and returns the cancel_result that the stream's reader
// hands over (never to Next); presence frames arrive from Next and
// Stream.Presence holds the last; before the first connect there is no
// socket to send on.
func TestClientCancelOverTheSocket(t *testing.T) {
	t.Parallel()
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s", ""))
	tr, err := s.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	require.NoError(t, tr.SetStatus("streaming"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := ws.Subscribe(ctx, s.url("s", ""), ws.StreamOptions{Client: "go-1", Presence: true})
	defer st.Close()

	_, err = st.Cancel(ctx, resume.CancelRequest{})
	assert.ErrorIs(t, err, ws.ErrNotConnected)

	ev, err := st.Next()
	require.NoError(t, err)
	require.Equal(t, frame.TypePresence, ev.Type, "the presence snapshot first")
	p, ok := st.Presence()
	require.True(t, ok)
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 1, Status: "streaming", Turn: "t1"}, p)

	// Next reads on: every frame it returns goes to types; the answers
	// go to the Cancel calls.
	types := make(chan string, 64)
	go func() {
		defer close(types)
		for {
			ev, err := st.Next()
			if err != nil {
				return
			}
			types <- ev.Type
		}
	}()
	res, err := st.Cancel(ctx, resume.CancelRequest{Turn: "t1"})
	require.NoError(t, err)
	assert.Equal(t, eventbus.CancelResult{Cancelled: []string{"t1"}, Held: []string{}}, res)
	_, err = st.Cancel(ctx, resume.CancelRequest{Turn: "t1"})
	var se *resume.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.Status)
	assert.ErrorIs(t, err, eventbus.ErrTurnEnded)
	res, err = st.Cancel(ctx, resume.CancelRequest{Turn: "t2", Cascade: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"t2"}, res.Held)

	seen := map[string]int{}
	for typ := range types {
		seen[typ]++
		if p, _ := st.Presence(); seen[frame.TypeTurnEnd] == 1 && seen[frame.TypeTurnCancel] == 2 && p.Status == "idle" {
			break
		}
	}
	assert.Zero(t, seen[ws.TypeCancelResult], "answers go to Cancel, not to Next")
	p, _ = st.Presence()
	assert.Equal(t, "idle", p.Status, "the turn's end set the status back")
	info, ok := s.bus.Turn("s", "t1")
	require.True(t, ok)
	assert.Equal(t, frame.ReasonCancelled, info.Reason)
	st.Close()
	for range types {
	}
}
