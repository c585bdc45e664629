package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// SubscribeOptions.StrictCursor: a lost position is a *PositionLostError
// (checked with errors.As) naming the reason, the cursor and where nothing
// is missing, and nothing is registered; a position still held subscribes
// as without it. A snapshot provider is not asked: the error says the
// position is gone.
func TestStrictCursorRefusesALostPosition(t *testing.T) {
	t.Parallel()
	asked := 0
	b := newBus(t, eventbus.Options{ReplayBufferSize: 4, Epoch: "e1",
		Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
			asked++
			return json.RawMessage(`{}`), 0, nil
		}})
	ids := publish(t, b, "s", 10) // the ring holds ids 7…10
	for _, tc := range []struct {
		name   string
		cursor eventbus.Position
		sc     scope.Kind
		want   *frame.ResyncData // the error's payload; nil: subscribes
	}{
		{"evicted", eventbus.Position{ID: ids[1], Epoch: "e1"}, scope.Session,
			&frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: ids[1], Epoch: "e1", CompleteFromID: ids[6]}},
		{"evicted, all scope", eventbus.Position{ID: ids[1]}, scope.All,
			&frame.ResyncData{Reason: frame.ReasonRingEvicted, LastDeliveredID: ids[1], Epoch: "e1", CompleteFromID: ids[6]}},
		{"another epoch", eventbus.Position{ID: ids[8], Epoch: "e0"}, scope.Session,
			&frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: ids[8], Epoch: "e1"}},
		{"past the newest id", eventbus.Position{ID: ids[9] + 5}, scope.Session,
			&frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: ids[9] + 5, Epoch: "e1"}},
		{"the newest evicted id", eventbus.Position{ID: ids[5], Epoch: "e1"}, scope.Session, nil},
		{"the tail", eventbus.Position{ID: ids[9], Epoch: "e1"}, scope.Descendants, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cursor
			sub, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &c, Scope: tc.sc, StrictCursor: true})
			if tc.want == nil {
				require.NoError(t, err)
				defer sub.Close()
				ev := next(t, sub)
				assert.NotEqual(t, frame.TypeStateResyncRequired, ev.Type, "no gap announced")
				return
			}
			require.Error(t, err)
			assert.Nil(t, sub)
			var lost *eventbus.PositionLostError
			require.True(t, errors.As(err, &lost), "%#v", err)
			assert.Equal(t, *tc.want, lost.ResyncData)
			assert.Contains(t, err.Error(), tc.want.Reason)
			assert.Zero(t, testkit.SubscriberCounts(b)["s"], "nothing registered")
		})
	}
	assert.Zero(t, asked, "the snapshot provider was not asked")
}

// StrictCursor errs exactly when the same subscribe without it starts with
// state_resync_required{ring_evicted or epoch_reset}, with that reason; and
// a resume from the error's CompleteFromID-1 loses nothing more.
func TestStrictCursorMatchesTheResyncFrame(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 8).Draw(rt, "ring")
		b, err := eventbus.New(eventbus.Options{ReplayBufferSize: size, Epoch: "e1"})
		require.NoError(rt, err)
		defer b.Close()
		n := rapid.IntRange(0, 20).Draw(rt, "events")
		for i := range n {
			session := rapid.SampledFrom([]string{"s", "t"}).Draw(rt, "session")
			_, err := b.Publish(session, "msg", i)
			require.NoError(rt, err)
		}
		_, err = b.Publish("s", "msg", -1) // s exists
		require.NoError(rt, err)
		cursor := eventbus.Position{ID: uint64(rapid.IntRange(0, n+3).Draw(rt, "cursor")),
			Epoch: rapid.SampledFrom([]string{"", "e1", "e0"}).Draw(rt, "epoch")}

		loose, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &cursor})
		require.NoError(rt, err)
		first, ok := loose.TryNext()
		require.True(rt, ok, "a resume always has replay_complete")
		loose.Close()
		var d frame.ResyncData
		if first.Type == frame.TypeStateResyncRequired {
			require.NoError(rt, json.Unmarshal(first.Data, &d))
		}

		strict, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &cursor, StrictCursor: true})
		var lost *eventbus.PositionLostError
		switch d.Reason {
		case frame.ReasonRingEvicted, frame.ReasonEpochReset:
			require.ErrorAs(rt, err, &lost)
			assert.Equal(rt, d.Reason, lost.Reason)
			assert.Equal(rt, cursor.ID, lost.LastDeliveredID)
		default:
			require.NoError(rt, err)
			strict.Close()
			return
		}
		if lost.Reason != frame.ReasonRingEvicted {
			return
		}
		// The frame names the first id held after the gap; the error the
		// first after the newest id lost, which is never later.
		assert.GreaterOrEqual(rt, d.CompleteFromID, lost.CompleteFromID)
		again := eventbus.Position{ID: lost.CompleteFromID - 1, Epoch: "e1"}
		sub, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &again, StrictCursor: true})
		require.NoError(rt, err, "a resume from complete-from − 1")
		sub.Close()
	})
}

// Bus.SessionInfo is one session's line of Bus.Sessions: the newest id
// published to it (not the bus's), its parent and buffer; false for a
// session that does not exist or was closed.
func TestSessionInfoIsTheSessionsLine(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 2})
	a := publish(t, b, "root", 3)
	require.NoError(t, b.CreateSession("child", "root"))
	publish(t, b, "other", 2)
	info, ok := b.SessionInfo("root")
	require.True(t, ok)
	assert.Equal(t, a[2], info.LastEventID, "the session's newest id, not the bus's")
	assert.Equal(t, 2, info.Buffered)
	info, ok = b.SessionInfo("child")
	require.True(t, ok)
	assert.Equal(t, "root", info.Parent)
	assert.Zero(t, info.LastEventID)
	for _, l := range b.Sessions() {
		got, ok := b.SessionInfo(l.ID)
		require.True(t, ok)
		assert.Equal(t, l, got)
	}
	_, ok = b.SessionInfo("nobody")
	assert.False(t, ok)
	require.NoError(t, b.CloseSession("other"))
	_, ok = b.SessionInfo("other")
	assert.False(t, ok, "closed")
}
