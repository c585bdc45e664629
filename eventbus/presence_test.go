package eventbus_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// presences returns the presence frames among evs, decoded.
func presences(t testing.TB, evs []eventbus.Event) []frame.PresenceData {
	t.Helper()
	var out []frame.PresenceData
	for _, e := range evs {
		if e.Type == frame.TypePresence {
			assert.Zero(t, e.ID, "a presence frame has no id")
			out = append(out, decode[frame.PresenceData](t, e))
		}
	}
	return out
}

func TestPresenceSnapshotComesFirstThenChanges(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	publish(t, b, "s", 2)
	require.NoError(t, b.SetStatus("s", "thinking"))
	watcher := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "alice", Presence: true, Cursor: eventbus.At(0)})
	evs := drain(watcher)
	assert.Equal(t, []string{frame.TypePresence, "1r", "2r", frame.TypeReplayComplete}, describe(evs), "the snapshot before the replay")
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 1, Status: "thinking"}, presences(t, evs)[0])

	bob := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "bob"})
	anon := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	require.NoError(t, b.SetStatus("s", "streaming"))
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	_, err = tr.End(nil)
	require.NoError(t, err)
	anon.Close()
	assert.Equal(t, []frame.PresenceData{
		{Session: "s", Clients: 2, Status: "thinking", Joined: []string{"bob"}},
		{Session: "s", Clients: 3, Status: "thinking"}, // an anonymous subscriber counts, unnamed
		{Session: "s", Clients: 3, Status: "streaming"},
		{Session: "s", Clients: 3, Status: "streaming", Turn: "t"},
		{Session: "s", Clients: 3, Status: "idle"}, // a turn's end sets the status back to idle
		{Session: "s", Clients: 2, Status: "idle"},
	}, presences(t, drain(watcher)))
	got, err := b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 2, Status: "idle"}, got)
	bob.Close()

	assert.Empty(t, presences(t, logOf(t, b, "s", 0)), "presence is never stored")
	assert.NotZero(t, b.Stats().PresenceChanges)
}

// Subscribers that do not ask for presence get no presence frames: their
// frame sequences are what they were before presence existed.
func TestPresenceIsOptIn(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	plain := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
	require.NoError(t, b.SetStatus("s", "thinking"))
	subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "d"})
	assert.Empty(t, drain(plain))
}

// A client that reconnects within the grace neither leaves nor joins;
// one that stays away longer leaves when the grace ends.
func TestPresenceReconnectWithinGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := created(t, eventbus.Options{PresenceGrace: 15 * time.Second}, "s")
		watcher := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "w", Presence: true})
		require.Len(t, presences(t, drain(watcher)), 1)

		c := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
		assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 2, Status: "idle", Joined: []string{"c"}}}, presences(t, drain(watcher)))
		c.Close()
		time.Sleep(14 * time.Second)
		c = subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
		second := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"}) // a second tab of the same client
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Empty(t, drain(watcher), "a reconnect within the grace: no leave, no join")
		got, err := b.Presence("s")
		require.NoError(t, err)
		assert.Equal(t, 2, got.Clients, "a client's subscriptions count once")

		c.Close()
		second.Close()
		time.Sleep(14 * time.Second)
		synctest.Wait()
		assert.Empty(t, drain(watcher), "still within the grace")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 1, Status: "idle", Left: []string{"c"}}}, presences(t, drain(watcher)))
	})
}

// Anonymous subscribers cannot be matched across a reconnect: each
// leaves at once and a reconnect joins anew.
func TestAnonymousSubscribersLeaveAtOnce(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	watcher := subscribe(t, b, "s", eventbus.SubscribeOptions{Presence: true})
	assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 1, Status: "idle"}}, presences(t, drain(watcher)))
	a := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	a.Close()
	assert.Equal(t, []frame.PresenceData{
		{Session: "s", Clients: 2, Status: "idle"},
		{Session: "s", Clients: 1, Status: "idle"},
	}, presences(t, drain(watcher)))
}

// The grace ends with the bus: Close stops the pending leaves.
func TestPresenceGraceStopsAtClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := created(t, eventbus.Options{}, "s")
		c := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
		c.Close()
		require.NoError(t, b.Close())
		time.Sleep(time.Minute)
		synctest.Wait()
	})
}

func TestSetStatusRefusals(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s", "gone")
	require.NoError(t, b.CloseSession("gone"))
	watcher := subscribe(t, b, "s", eventbus.SubscribeOptions{Presence: true})
	drain(watcher)
	for _, tc := range []struct {
		name    string
		session string
		status  string
		err     error
		text    string
	}{
		{"empty", "s", "", eventbus.ErrInvalid, `status "" is 0 bytes (want 1 to 64)`},
		{"too long", "s", strings.Repeat("x", 65), eventbus.ErrInvalid, `is 65 bytes (want 1 to 64)`},
		{"space", "s", "two words", eventbus.ErrInvalid, `status "two words": character ' ' not in [A-Za-z0-9_.:-]`},
		{"control", "s", "a\nb", eventbus.ErrInvalid, `character '\n'`},
		{"unknown session", "nope", "idle", eventbus.ErrSessionNotFound, `"nope"`},
		{"closed session", "gone", "idle", eventbus.ErrSessionClosed, `"gone"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.SetStatus(tc.session, tc.status)
			require.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.text)
		})
	}
	assert.Empty(t, drain(watcher), "no change")
	require.NoError(t, b.SetStatus("s", "awaiting_input"))
	require.NoError(t, b.SetStatus("s", "tool:search.v2-x"))
	require.NoError(t, b.SetStatus("s", "tool:search.v2-x"), "the same status again changes nothing")
	assert.Len(t, presences(t, drain(watcher)), 2)

	_, err := b.Presence("nope")
	assert.ErrorIs(t, err, eventbus.ErrSessionNotFound)
	_, err = b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "a\x00"})
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.ErrorContains(t, err, `client id "a\x00"`)
}

func TestTurnSetStatus(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	require.NoError(t, tr.SetStatus("streaming"))
	got, err := b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, frame.PresenceData{Session: "s", Status: "streaming", Turn: "t"}, got)
	_, err = tr.End(nil)
	require.NoError(t, err)
	require.ErrorIs(t, tr.SetStatus("streaming"), eventbus.ErrTurnEnded)
	got, err = b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, frame.PresenceData{Session: "s", Status: "idle"}, got)
}
