package turnstream_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/eventbus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseCursor(t *testing.T) {
	t.Parallel()
	rows := []struct {
		in     string
		want   turnstream.Cursor
		ok     bool
		errHas string
	}{
		{"", turnstream.Cursor{}, false, ""},
		{"ep-7", turnstream.Cursor{Seq: 7, Epoch: "ep"}, true, ""},
		{"ep-7:2", turnstream.Cursor{Seq: 7, K: 2, Mid: true, Epoch: "ep"}, true, ""},
		{"7", turnstream.Cursor{Seq: 7}, true, ""},
		{"other-7", turnstream.Cursor{Seq: 7, Epoch: "other"}, false, ""}, // another epoch: a join
		{"ep-0", turnstream.Cursor{Epoch: "ep"}, false, ""},
		{"ep-x", turnstream.Cursor{}, false, `"ep-x"`},
		{"ep-7:", turnstream.Cursor{}, false, "frame index"},
		{"ep-7:01", turnstream.Cursor{}, false, "frame index"},
		{"ep-7:-1", turnstream.Cursor{}, false, "frame index"},
	}
	for _, r := range rows {
		c, ok, err := turnstream.ParseCursor(r.in, "ep")
		if r.errHas != "" {
			require.Error(t, err, r.in)
			assert.Contains(t, err.Error(), r.errHas, r.in)
			continue
		}
		require.NoError(t, err, r.in)
		assert.Equal(t, r.ok, ok, r.in)
		assert.Equal(t, r.want, c, r.in)
	}
}

// Locate finds the turn an id falls in: the active one, or an ended one
// from the replay buffer with its end.
func TestLocateFindsTheTurnOfAnID(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("s", ""))
	ctx := context.Background()
	before, err := bus.Publish("s", "x", nil)
	require.NoError(t, err)
	t1, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	mid, err := t1.Publish("x", nil)
	require.NoError(t, err)
	end, err := t1.End(nil)
	require.NoError(t, err)
	t2, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t2"})
	require.NoError(t, err)
	live, err := t2.Publish("x", nil)
	require.NoError(t, err)

	_, found, err := turnstream.Locate(ctx, bus, "s", before.ID)
	require.NoError(t, err)
	assert.False(t, found, "before any turn")
	got, found, err := turnstream.Locate(ctx, bus, "s", mid.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "t1", got.Turn)
	assert.Equal(t, t1.Start().ID, got.StartID)
	assert.Equal(t, end.ID, got.EndID)
	got, found, err = turnstream.Locate(ctx, bus, "s", live.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "t2", got.Turn)
	assert.Zero(t, got.EndID)
}
