package eventbus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Replay and live by event type (SubscribeOptions.Types).

func pubType(t *testing.T, b *eventbus.Bus, session, typ string, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := range n {
		ev, err := b.Publish(session, typ, map[string]int{"n": i})
		require.NoError(t, err)
		out = append(out, ev.ID)
	}
	return out
}

// A filtered subscriber receives its types in the replay and live, and
// session_closed whatever its types.
func TestTypesFilterReplayAndLive(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	a1 := pubType(t, b, "s", "a", 2)
	pubType(t, b, "s", "b", 2)
	c1 := pubType(t, b, "s", "c", 1)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Types: []string{"a", "c"}})
	a2 := pubType(t, b, "s", "a", 1)
	pubType(t, b, "s", "b", 3)
	require.NoError(t, b.CloseSession("s"))
	evs, err := readToEnd(t, s)
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	want := append(append(append([]uint64{}, a1...), c1...), a2...)
	assert.Equal(t, want, ids(evs)[:len(want)])
	assert.Equal(t, frame.TypeSessionClosed, evs[len(evs)-1].Type)
	assert.Len(t, ids(evs), len(want)+1, "and session_closed: %v", describe(evs))
}

// langgraph#7778: a filtered client that rejoins is told of a gap only
// when events of its types were lost — not when other types overflowed
// the buffer — and is told when they were.
func TestTypesFilterGapOnlyForItsTypes(t *testing.T) {
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 3})
	a := pubType(t, b, "s", "a", 1)
	cursor := a[0] // the client has a1, then goes away
	pubType(t, b, "s", "b", 10)
	resume := func(types []string) []eventbus.Event {
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: cursor}, Types: types})
		return readReplay(t, s)
	}
	frames := resume([]string{"a"})
	assert.Equal(t, []string{frame.TypeReplayComplete}, describe(frames), "no a was lost")
	assert.Equal(t, "state_resync_required:ring_evicted", describe(resume(nil))[0], "unfiltered: b's were lost")

	a2 := pubType(t, b, "s", "a", 4) // a2 is evicted by a3–a5
	frames = resume([]string{"a"})
	d, ok := resyncOf(t, frames)
	require.True(t, ok, "%v", describe(frames))
	assert.Equal(t, a2[1], d.CompleteFromID)
	assert.Equal(t, a2[1:], ids2(frames))
}

// A filtered client resumes exactly across cuts: after each cut it
// resumes from the last id it received, with the same filter, and in the
// end has every event of its types exactly once, in order.
func TestTypesFilterResumesAcrossCuts(t *testing.T) {
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 8})
	var want, got []uint64
	var cursor *eventbus.Position
	for round := range 5 {
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: cursor, Types: []string{"a"}})
		want = append(want, pubType(t, b, "s", "a", round+1)...)
		pubType(t, b, "s", "b", 5)
		for _, ev := range drain(s) {
			require.NotEqual(t, frame.TypeStateResyncRequired, ev.Type)
			if ev.ID != 0 {
				got = append(got, ev.ID)
				cursor = &eventbus.Position{Epoch: "e", ID: ev.ID}
			}
		}
		s.Close() // the cut
		want = append(want, pubType(t, b, "s", "a", 1)...)
		pubType(t, b, "s", "b", 2)
	}
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: cursor, Types: []string{"a"}})
	got = append(got, ids2(drain(s))...)
	assert.Equal(t, want, got)
}

func TestTypesFilterValidated(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	for _, types := range [][]string{{""}, {"a b"}, {"a\n"}, make([]string, 65)} {
		_, err := b.Subscribe(t.Context(), "s", eventbus.SubscribeOptions{Types: types})
		require.ErrorIs(t, err, eventbus.ErrInvalid, "%q", types)
	}
}
