package ws_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// A snapshot frame stands for the id its state reflects (its
// lastEventId): the Go client takes it as its cursor, and a client that
// resumes from it — a browser's resume message, or the Go client's
// reconnect — on the URL it had (?snapshot=1) gets exactly the events
// after it and no second snapshot.
func TestSnapshotCursorResumes(t *testing.T) {
	t.Parallel()
	s := newServer(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 2,
		Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
			return json.RawMessage(`{"text":"abc"}`), 3, nil
		}}, ws.HandlerOptions{})
	publish(t, s.bus, "s1", 4) // ids 1–4; the ring holds 3 and 4
	url := s.url("s1", "snapshot=1")

	// A browser's first connection: no cursor, the snapshot first.
	c := dial(t, url)
	send(t, c, `{"resume":{}}`)
	ev := read(t, c)
	require.Equal(t, frame.TypeSnapshot, ev.Type)
	assert.Equal(t, uint64(4), read(t, c).ID)
	_ = c.CloseNow()

	// Its reconnect resumes from the snapshot's lastEventId.
	c = dial(t, url)
	send(t, c, `{"resume":{"lastEventId":"e-3"}}`)
	assert.Equal(t, uint64(4), read(t, c).ID, "the events after the snapshot's id, no second snapshot")
	assert.Equal(t, frame.TypeReplayComplete, read(t, c).Type)
	_ = c.CloseNow()

	// The Go client: the snapshot moves its cursor.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	st := ws.Subscribe(ctx, url, ws.StreamOptions{})
	ev, err := st.Next()
	require.NoError(t, err)
	require.Equal(t, frame.TypeSnapshot, ev.Type)
	assert.Equal(t, "3", st.LastEventID())
	assert.Equal(t, "e", st.Epoch())
	require.NoError(t, st.Close())
	st = ws.Subscribe(ctx, url, ws.StreamOptions{LastEventID: "3", Epoch: "e"})
	defer st.Close()
	ev, err = st.Next()
	require.NoError(t, err)
	assert.Equal(t, uint64(4), ev.ID, "its reconnect: the events after the snapshot's id, no second snapshot")
}
