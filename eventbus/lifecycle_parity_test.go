package eventbus_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// The ends of a subscription and the edges of a session's life where a
// porter from AgentPool meets a choice; docs/python-parity.md lists each.

// AgentPool's test_unsubscribe_closes_queue (tests/orchestrator/
// test_event_bus.py): unsubscribe() shuts the queue down without
// `immediate`, so the consumer still drains what was queued (ev-1) and then
// gets QueueShutDown. Unsubscribe is that draining end; Close (the
// discarding end) is AgentPool's shutdown(immediate=True).
func TestUnsubscribeClosesQueue(t *testing.T) {
	t.Parallel()
	b := pyBus(t, 5, 0)
	s := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{})
	ev := run(t, b, "sess-bp", "ev-1")
	s.Unsubscribe()
	assert.NotContains(t, b.SubscriberCounts(), "sess-bp", "the slot is released at once")
	after := run(t, b, "sess-bp", "ev-2")
	evs, err := readToEnd(t, s)
	assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)
	assert.Equal(t, []uint64{ev.ID}, ids(evs), "what was queued is drained, nothing published after the call")
	assert.NotContains(t, ids(evs), after.ID)
	assert.Equal(t, []string{"ev-1"}, runIDs(t, evs))

	// Idempotent; a Close after it discards what is left; the reason stays.
	s2 := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{NoReplay: true})
	run(t, b, "sess-bp", "ev-3")
	s2.Unsubscribe()
	s2.Unsubscribe()
	s2.Close()
	evs, err = readToEnd(t, s2)
	assert.Empty(t, evs, "Close after Unsubscribe discards")
	assert.ErrorIs(t, err, eventbus.ErrUnsubscribed)

	// The Events channel hands over what was queued, then closes.
	s3 := subscribe(t, b, "sess-bp", eventbus.SubscribeOptions{NoReplay: true})
	want := run(t, b, "sess-bp", "ev-4")
	s3.Unsubscribe()
	var got []uint64
	for ev := range s3.Events() {
		got = append(got, ev.ID)
	}
	assert.Equal(t, []uint64{want.ID}, got)
	assert.ErrorIs(t, s3.Err(), eventbus.ErrUnsubscribed)
}

// AgentPool's close_session pops the session's replay buffer
// (test_replay_buffer_cleared_on_session_close), and a later subscribe is
// accepted and replays nothing. Here Subscribe after CloseSession is
// ErrSessionClosed (for the session TTL, unless CreateSession reopens the
// id), as a late Publish is: a subscriber accepted on a closed session
// would wait for events that no publish may bring. Reopened, the session
// replays from its new incarnation on.
func TestSubscribeAfterCloseSession(t *testing.T) {
	t.Parallel()
	b := pyBus(t, 5, 0)
	run(t, b, "sess-1", "ev1")
	require.NoError(t, b.CloseSession("sess-1"))
	_, err := b.Subscribe(context.Background(), "sess-1", eventbus.SubscribeOptions{})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.Contains(t, err.Error(), `"sess-1"`, "the error names the session")
	_, err = b.Subscribe(context.Background(), "sess-1", eventbus.SubscribeOptions{NoReplay: true})
	require.ErrorIs(t, err, eventbus.ErrSessionClosed, "replay=False changes nothing")

	require.NoError(t, b.CreateSession("sess-1", ""))
	s := subscribe(t, b, "sess-1", eventbus.SubscribeOptions{})
	assert.Empty(t, drain(s), "a reopened root's buffer starts empty: nothing replayed")
	ev := run(t, b, "sess-1", "ev2")
	assert.Equal(t, []uint64{ev.ID}, ids(drain(s)))
}

// AgentPool's _merge_envelopes merges raw events that carry no event id.
// Here ID 0 is the mark of a synthetic frame (Event.Synthetic), so
// Coalesce never merges an id-0 event: it passes through and ends any run.
// Events with ids merge as AgentPool's do.
func TestCoalesceLeavesIDZeroEventsUnmerged(t *testing.T) {
	t.Parallel()
	delta := func(id uint64, text string) eventbus.Event {
		data, err := json.Marshal(map[string]string{"delta": text})
		require.NoError(t, err)
		return eventbus.Event{ID: id, Session: "s", Type: "delta", Data: data}
	}
	c := byType{}
	raw := []eventbus.Event{delta(0, "a"), delta(0, "b"), delta(0, "c")}
	got := eventbus.Coalesce(c, raw)
	assert.Equal(t, raw, got, "id-0 events pass through unmerged and in order")

	withIDs := []eventbus.Event{delta(1, "a"), delta(2, "b"), delta(0, "x"), delta(3, "c"), delta(4, "d")}
	got = eventbus.Coalesce(c, withIDs)
	require.Len(t, got, 3)
	assert.Equal(t, 2, got[0].Count)
	assert.Equal(t, uint64(2), got[0].ID)
	assert.Equal(t, uint64(0), got[1].ID, "the id-0 event ends the run")
	assert.Equal(t, 2, got[2].Count)
	assert.Equal(t, uint64(3), got[2].FirstID)
	sc := eventbus.Event{Session: "s", Type: frame.TypeSlowClientWarning, Data: []byte(`{}`)}
	assert.Equal(t, []eventbus.Event{sc}, eventbus.Coalesce(c, []eventbus.Event{sc}))
}

// byType merges consecutive events of one type by concatenating the
// "delta" strings.
type byType struct{}

func (byType) Key(ev eventbus.Event) (string, bool) { return ev.Type, false }
func (byType) Merge(_ string, evs []eventbus.Event) (json.RawMessage, error) {
	var all string
	for _, ev := range evs {
		var d struct{ Delta string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		all += d.Delta
	}
	return json.Marshal(map[string]string{"delta": all})
}
