package eventbus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// sessionsOf lists each frame as session:id (events) or session:type.
func sessionsOf(evs []eventbus.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		if e.ID != 0 {
			out = append(out, e.Session+":"+itoa(e.ID))
		} else {
			out = append(out, e.Session+":"+e.Type)
		}
	}
	return out
}

func itoa(n uint64) string { return string(rune('0'+n/10)) + string(rune('0'+n%10)) }

func TestManySessionsInIDOrder(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("p", ""))
	require.NoError(t, b.CreateSession("p/kid", "p"))
	publish(t, b, "a", 1)     // 1
	publish(t, b, "x", 1)     // 2: not in the set
	publish(t, b, "b", 1)     // 3
	publish(t, b, "p/kid", 1) // 4: under p, which is in the set with descendants
	s := subscribe(t, b, "a", eventbus.SubscribeOptions{
		Sessions: map[string]scope.Kind{"b": scope.Session, "p": scope.Descendants}})
	publish(t, b, "b", 1) // 5
	publish(t, b, "x", 1) // 6
	publish(t, b, "a", 1) // 7
	publish(t, b, "p", 1) // 8
	assert.Equal(t, []string{"a:01", "b:03", "p/kid:04", "b:05", "a:07", "p:08"}, sessionsOf(readN(t, s, 6)))
	assert.Empty(t, drain(s))
}

func TestManySessionsFloorsAndResync(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 2})
	publish(t, b, "a", 1) // 1
	publish(t, b, "b", 1) // 2
	publish(t, b, "a", 1) // 3
	publish(t, b, "b", 1) // 4
	publish(t, b, "c", 3) // 5 6 7: c's ring holds 6, 7
	// Main position 4; b at 2 (owed 4); c at 0: its 5 is gone.
	s := subscribe(t, b, "a", eventbus.SubscribeOptions{
		Sessions: map[string]scope.Kind{"b": scope.Session, "c": scope.Session},
		Cursor:   eventbus.At(4), Floors: map[string]uint64{"b": 2, "c": 0}})
	got := readN(t, s, 5)
	assert.Equal(t, []string{"c:state_resync_required", "b:04", "c:06", "c:07", ":replay_complete"}, sessionsOf(got))
	d := decode[frame.ResyncData](t, got[0])
	assert.Equal(t, frame.ReasonRingEvicted, d.Reason)
	assert.Equal(t, uint64(6), d.CompleteFromID)

	// Another epoch: one epoch_reset per session, named.
	s2 := subscribe(t, b, "a", eventbus.SubscribeOptions{
		Sessions: map[string]scope.Kind{"b": scope.Session},
		Cursor:   &eventbus.Position{Epoch: "other", ID: 3}})
	got = readN(t, s2, 2)
	assert.Equal(t, []string{"a:state_resync_required", "b:state_resync_required"}, sessionsOf(got))
}

func TestManySessionsMemberCloseDoesNotEnd(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "a", 1)
	publish(t, b, "b", 1)
	s := subscribe(t, b, "a", eventbus.SubscribeOptions{Sessions: map[string]scope.Kind{"b": scope.Session}, NoReplay: true})
	require.NoError(t, b.CloseSession("a"))
	publish(t, b, "b", 1)
	got := readN(t, s, 2)
	assert.Equal(t, frame.TypeSessionClosed, got[0].Type)
	assert.Equal(t, "b", got[1].Session)
	require.NoError(t, s.Err())
}

func TestManySessionsRefusals(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "a", 1)
	for name, o := range map[string]eventbus.SubscribeOptions{
		"all scope":       {Sessions: map[string]scope.Kind{"b": scope.All}},
		"presence":        {Sessions: map[string]scope.Kind{"b": scope.Session}, Presence: true},
		"floor off set":   {Sessions: map[string]scope.Kind{"b": scope.Session}, Cursor: eventbus.At(0), Floors: map[string]uint64{"z": 1}},
		"floor no cursor": {Floors: map[string]uint64{"a": 1}},
	} {
		_, err := b.Subscribe(t.Context(), "a", o)
		assert.ErrorIs(t, err, eventbus.ErrInvalid, name)
	}
	_, err := b.Subscribe(t.Context(), "a", eventbus.SubscribeOptions{Sessions: map[string]scope.Kind{"nope": scope.Session}, RequireSession: true})
	assert.ErrorIs(t, err, eventbus.ErrSessionNotFound)
	assert.ErrorContains(t, err, `"nope"`)
}

func TestManySessionsScopes(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("root", ""))
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, b.CreateSession(s, "root"))
	}
	require.NoError(t, b.CreateSession("a/1", "a"))
	require.NoError(t, b.CreateSession("other", ""))
	// b with subtree: b, its parent root and its siblings a and c (not a/1);
	// a/1 alone; other not at all.
	s := subscribe(t, b, "a/1", eventbus.SubscribeOptions{Sessions: map[string]scope.Kind{"b": scope.Subtree}, NoReplay: true})
	for _, x := range []string{"root", "a", "a/1", "b", "c", "other"} {
		publish(t, b, x, 1)
	}
	var got []string
	for _, e := range readN(t, s, 5) {
		got = append(got, e.Session)
	}
	assert.Equal(t, []string{"root", "a", "a/1", "b", "c"}, got)
	assert.Empty(t, drain(s))
}
