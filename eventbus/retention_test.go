package eventbus_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Retention by bytes and age (Options.ReplayMaxBytes, ReplayMaxAge):
// whichever bound binds first evicts the oldest, and every eviction is
// announced to a resume that needed it.

// resyncOf decodes the state_resync_required frame among frames; ok is
// false when there is none.
func resyncOf(t *testing.T, frames []eventbus.Event) (d frame.ResyncData, ok bool) {
	t.Helper()
	for _, f := range frames {
		if f.Type == frame.TypeStateResyncRequired {
			require.NoError(t, json.Unmarshal(f.Data, &d))
			return d, true
		}
	}
	return d, false
}

func TestRetentionBytesEvictsAndAnnounces(t *testing.T) {
	// Each "msg" payload is {"n":i}: 7 bytes for i < 10.
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayMaxBytes: 21})
	ids := publish(t, b, "s", 8)
	assert.Equal(t, 3, b.Sessions()[0].Buffered, "21 bytes hold three 7-byte events")
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: ids[1]}})
	frames := readReplay(t, s)
	d, ok := resyncOf(t, frames)
	require.True(t, ok, "the eviction is announced: %v", describe(frames))
	assert.Equal(t, frame.ReasonRingEvicted, d.Reason)
	assert.Equal(t, ids[5], d.CompleteFromID)
	assert.Equal(t, ids[5:], ids2(frames))

	// A cursor at the oldest held event's predecessor lost nothing.
	s2 := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: ids[4]}})
	frames = readReplay(t, s2)
	_, ok = resyncOf(t, frames)
	assert.False(t, ok, "%v", describe(frames))
	assert.Equal(t, ids[5:], ids2(frames))

	t.Run("one event larger than the bound stays alone", func(t *testing.T) {
		b := newBus(t, eventbus.Options{ReplayMaxBytes: 5})
		publish(t, b, "s", 3)
		assert.Equal(t, 1, b.Sessions()[0].Buffered)
	})
	t.Run("a folded record stays within the bound", func(t *testing.T) {
		b := newBus(t, eventbus.Options{ReplayMaxBytes: 1000, ReplayCompact: coalesce.ACP})
		want := publishReply(t, b, "s", 0, 100) // 100 chunks of about 80 bytes
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: b.Epoch(), ID: 0}})
		frames := readReplay(t, s)
		d, ok := resyncOf(t, frames)
		require.True(t, ok)
		var text string
		held := 0
		for _, f := range frames {
			if f.Type == chunkType {
				text += chunkText(t, f)
				held += max(f.Count, 1)
				assert.LessOrEqual(t, len(f.Data), 1000)
			}
		}
		assert.Equal(t, want[len(want)-len(text):], text, "the newest text, whole")
		assert.Equal(t, uint64(100-held+1), d.CompleteFromID, "everything from completeFromId on is held")
	})
}

func TestRetentionAgeEvictsAndAnnounces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{Epoch: "e", ReplayMaxAge: time.Minute})
		old := publish(t, b, "s", 3)
		time.Sleep(50 * time.Second)
		mid := publish(t, b, "s", 2)
		time.Sleep(20 * time.Second) // the first three are 70 s old, the next two 20 s
		newer := publish(t, b, "s", 1)
		assert.Equal(t, 3, b.Sessions()[0].Buffered, "publishing evicted the events over a minute old")

		s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: old[0]}})
		frames := readReplay(t, s)
		d, ok := resyncOf(t, frames)
		require.True(t, ok, "%v", describe(frames))
		assert.Equal(t, mid[0], d.CompleteFromID)
		assert.Equal(t, append(mid, newer...), ids2(frames))

		// Nobody publishes: a subscribe still sees the age bound.
		time.Sleep(2 * time.Minute)
		s2 := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: mid[0]}})
		frames = readReplay(t, s2)
		d, ok = resyncOf(t, frames)
		require.True(t, ok, "%v", describe(frames))
		assert.Equal(t, newer[0]+1, d.CompleteFromID, "nothing is held: complete from the next id")
		assert.Empty(t, ids2(frames))
	})
}

// ids2 returns the ids of the real events among frames (nil for none).
func ids2(frames []eventbus.Event) []uint64 {
	var out []uint64
	for _, f := range frames {
		if f.ID != 0 {
			out = append(out, f.ID)
		}
	}
	return out
}

func TestRetentionOptionsValidated(t *testing.T) {
	for _, tt := range []struct {
		o    eventbus.Options
		want string
	}{
		{eventbus.Options{ReplayMaxBytes: -1}, "eventbus: ReplayMaxBytes=-1: out of range 0 or [1B, 1GiB]"},
		{eventbus.Options{ReplayMaxBytes: 2 << 30}, "eventbus: ReplayMaxBytes=2147483648: out of range 0 or [1B, 1GiB]"},
		{eventbus.Options{ReplayMaxAge: time.Millisecond}, "eventbus: ReplayMaxAge=1ms: out of range 0 or [1s, 8760h]"},
	} {
		err := tt.o.Validate()
		require.ErrorIs(t, err, eventbus.ErrOutOfRange)
		assert.Equal(t, tt.want, err.Error())
	}
}
