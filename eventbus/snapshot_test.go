package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// Snapshot, then tail (Options.Snapshots, SubscribeOptions.Snapshot).

// transcript is an application's per-session state: the text of its
// chunks so far and the id of the newest one it holds, updated after
// each publish returns (as the example server does).
type transcript struct {
	mu   sync.Mutex
	text map[string]string
	asOf map[string]uint64
}

func newTranscript() *transcript {
	return &transcript{text: map[string]string{}, asOf: map[string]uint64{}}
}

// publish publishes a chunk of tok and records it.
func (tr *transcript) publish(t testing.TB, b *eventbus.Bus, session, tok string) uint64 {
	t.Helper()
	ev, err := b.PublishJSON(session, chunkType, chunk(session, tok))
	require.NoError(t, err)
	tr.mu.Lock()
	tr.text[session] += tok
	tr.asOf[session] = ev.ID
	tr.mu.Unlock()
	return ev.ID
}

func (tr *transcript) provide(_ context.Context, session string, _ scope.Kind) (json.RawMessage, uint64, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	state, err := json.Marshal(tr.text[session])
	return state, tr.asOf[session], err
}

// snapshotOf decodes a snapshot frame.
func snapshotOf(t testing.TB, ev eventbus.Event) (reason, text string, asOf uint64) {
	t.Helper()
	require.Equal(t, frame.TypeSnapshot, ev.Type, "a snapshot frame")
	assert.Zero(t, ev.ID, "it has no id of its own")
	var d frame.SnapshotData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	require.NoError(t, json.Unmarshal(d.State, &text))
	return d.Reason, text, d.LastEventID
}

// A client whose position was evicted gets the transcript and the events
// after it instead of ring_evicted; one that asks at join gets it too; an
// old epoch gets it with reason epoch_reset.
func TestSnapshotThenTail(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      eventbus.SubscribeOptions
		reason string
	}{
		{"ring_evicted", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: 3}}, frame.ReasonRingEvicted},
		{"requested", eventbus.SubscribeOptions{Snapshot: true}, frame.ReasonRequested},
		{"requested over a cursor", eventbus.SubscribeOptions{Snapshot: true, Cursor: &eventbus.Position{Epoch: "e", ID: 19}}, frame.ReasonRequested},
		{"epoch_reset", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "old", ID: 3}}, frame.ReasonEpochReset},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTranscript()
			b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 5, Snapshots: tr.provide})
			var want strings.Builder
			for i := range 20 {
				tr.publish(t, b, "s", tok(i))
				want.WriteString(tok(i))
			}
			// The transcript lags: it holds the first 17 chunks only.
			tr.mu.Lock()
			tr.text["s"], tr.asOf["s"] = strings.TrimSuffix(want.String(), tok(17)+tok(18)+tok(19)), 17
			tr.mu.Unlock()

			s := subscribe(t, b, "s", c.o)
			frames := readReplay(t, s)
			if c.reason == frame.ReasonEpochReset {
				// The restart sequence: the epoch_reset frame always comes
				// first, the snapshot after it (this epoch's history is
				// not whole: the buffer holds 5 of 20).
				d, ok := resyncOf(t, frames)
				require.True(t, ok)
				assert.Equal(t, frame.ReasonEpochReset, d.Reason)
				assert.Equal(t, frame.TypeStateResyncRequired, frames[0].Type)
				frames = frames[1:]
			}
			reason, text, asOf := snapshotOf(t, frames[0])
			assert.Equal(t, c.reason, reason)
			assert.EqualValues(t, 17, asOf)
			assert.Zero(t, count(frames, frame.TypeStateResyncRequired), "no gap: %v", describe(frames))
			assert.Equal(t, []uint64{18, 19, 20}, ids(frames), "exactly the events after it")
			for _, f := range frames {
				if f.Type == chunkType {
					text += chunkText(t, f)
				}
			}
			assert.Equal(t, want.String(), text)
			live := tr.publish(t, b, "s", "more ")
			assert.Equal(t, live, next(t, s).ID, "then live")
		})
	}
}

// A position that is not lost gets no snapshot; a provider that fails, or
// none, leaves today's frames.
func TestSnapshotOnlyWhenLostOrAsked(t *testing.T) {
	tr := newTranscript()
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 5, Snapshots: tr.provide})
	for i := range 10 {
		tr.publish(t, b, "s", tok(i))
	}
	frames := readReplay(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: 7}}))
	assert.Equal(t, []string{"8r:agent_message_chunk", "9r:agent_message_chunk", "10r:agent_message_chunk", frame.TypeReplayComplete}, describe(frames))

	failing := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 5, Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
		return nil, 0, errors.New("no transcript")
	}})
	ahead := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 5, Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
		return json.RawMessage(`"x"`), 99, nil // an id the bus never gave
	}})
	none := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 5})
	for _, b := range []*eventbus.Bus{failing, ahead, none} {
		publish(t, b, "s", 10)
		frames := readReplay(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Snapshot: true, Cursor: &eventbus.Position{Epoch: "e", ID: 2}}))
		assert.Equal(t, "state_resync_required:ring_evicted", describe(frames)[0], "today's behaviour")
		assert.Equal(t, seq(6, 10), ids(frames))
	}
}

// A snapshot older than the buffer: the events after it are gone too, and
// ring_evicted follows the snapshot.
func TestSnapshotOlderThanBuffer(t *testing.T) {
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayBufferSize: 3, Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
		return json.RawMessage(`""`), 2, nil
	}})
	publish(t, b, "s", 10)
	frames := readReplay(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Snapshot: true}))
	_, _, asOf := snapshotOf(t, frames[0])
	assert.EqualValues(t, 2, asOf)
	d, ok := resyncOf(t, frames)
	require.True(t, ok)
	assert.Equal(t, frame.ReasonRingEvicted, d.Reason)
	assert.EqualValues(t, 2, d.LastDeliveredID)
	assert.Equal(t, seq(8, 10), ids(frames))
}

// The seam under concurrency: while a reply streams (compacted or not),
// clients join asking for a snapshot; each one's snapshot text followed
// by the events after it is exactly the reply, with no id twice.
func TestSnapshotSeamWhilePublishing(t *testing.T) {
	for _, compact := range []eventbus.Coalescer{nil, coalesce.ACP} {
		tr := newTranscript()
		b := newBus(t, eventbus.Options{ReplayBufferSize: 64, Snapshots: tr.provide, ReplayCompact: compact})
		const n = 400
		var want strings.Builder
		for i := range n {
			want.WriteString(tok(i))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range n {
				tr.publish(t, b, "s", tok(i))
			}
		}()
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Snapshot: true})
				if !assert.NoError(t, err) {
					return
				}
				defer s.Close()
				ev := next(t, s)
				_, text, last := snapshotOf(t, ev)
				for last < uint64(n) {
					ev := next(t, s)
					if ev.ID == 0 {
						assert.Equal(t, frame.TypeReplayComplete, ev.Type)
						continue
					}
					assert.Greater(t, ev.ID, last, "no id twice, none out of order")
					assert.Equal(t, last+1, max(ev.FirstID, ev.ID)-uint64(max(ev.Count, 1))+1, "no gap at the seam")
					last = ev.ID
					text += chunkText(t, ev)
				}
				assert.Equal(t, want.String(), text)
			}()
		}
		<-done
		wg.Wait()
	}
}

// A provider whose state's tail is evicted before the subscriber can
// register (here: the provider itself publishes a whole buffer more on its
// first call) is asked again, and the seam stays exact.
func TestSnapshotAskedAgainWhenOvertaken(t *testing.T) {
	tr := newTranscript()
	var b *eventbus.Bus
	calls := 0
	provide := func(ctx context.Context, session string, sc scope.Kind) (json.RawMessage, uint64, error) {
		state, asOf, err := tr.provide(ctx, session, sc)
		if calls++; calls == 1 {
			for i := range 10 { // the buffer holds 4: asOf's tail goes
				tr.publish(t, b, session, "late"+tok(i))
			}
		}
		return state, asOf, err
	}
	b = newBus(t, eventbus.Options{ReplayBufferSize: 4, Snapshots: provide})
	for i := range 6 {
		tr.publish(t, b, "s", tok(i))
	}
	frames := readReplay(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Snapshot: true}))
	assert.Equal(t, 2, calls)
	reason, text, asOf := snapshotOf(t, frames[0])
	assert.Equal(t, frame.ReasonRequested, reason)
	assert.EqualValues(t, 16, asOf)
	assert.Zero(t, count(frames, frame.TypeStateResyncRequired), "%v", describe(frames))
	assert.Empty(t, ids(frames))
	tr.mu.Lock()
	assert.Equal(t, tr.text["s"], text)
	tr.mu.Unlock()
}

// Issue 27.2: the provider was asked for a session only, so a state could
// not hold just what the reader's scope covers (the demo's transcript gave
// a page of one sub-agent the whole run). It is asked with the
// subscription's scope.
func TestSnapshotProviderIsAskedForTheScope(t *testing.T) {
	for _, k := range []scope.Kind{scope.Session, scope.Descendants, scope.Subtree, scope.All} {
		t.Run(k.String(), func(t *testing.T) {
			type request struct {
				session string
				sc      scope.Kind
			}
			asked := make(chan request, 1)
			b := newBus(t, eventbus.Options{Snapshots: func(_ context.Context, session string, sc scope.Kind) (json.RawMessage, uint64, error) {
				asked <- request{session, sc}
				return json.RawMessage(`{}`), 0, nil
			}})
			subscribe(t, b, "s", eventbus.SubscribeOptions{Scope: k, Snapshot: true})
			assert.Equal(t, request{"s", k}, <-asked)
		})
	}
}

// Issue 27.3: after a restart a client that listens only for
// state_resync_required was told nothing (a provider's snapshot replaced
// the epoch_reset frame), and the new epoch's events already published
// were not replayed (only the snapshot's state). A cursor of another epoch
// now always gets state_resync_required{epoch_reset} first; then this
// epoch's history: every event when the buffer holds it all (no snapshot,
// even with a provider), else the snapshot and the events after it.
func TestRestartSequence(t *testing.T) {
	old := &eventbus.Position{Epoch: "old", ID: 42}
	for _, c := range []struct {
		name      string
		provider  bool
		published int // of a ring of 5
		want      []string
	}{
		{"whole history, provider", true, 3, []string{"state_resync_required:epoch_reset", "1r:agent_message_chunk", "2r:agent_message_chunk", "3r:agent_message_chunk", "replay_complete"}},
		{"whole history, no provider", false, 3, []string{"state_resync_required:epoch_reset", "1r:agent_message_chunk", "2r:agent_message_chunk", "3r:agent_message_chunk", "replay_complete"}},
		{"history cut, provider", true, 8, []string{"state_resync_required:epoch_reset", "snapshot", "replay_complete"}},
		{"history cut, no provider", false, 8, []string{"state_resync_required:epoch_reset", "4r:agent_message_chunk", "5r:agent_message_chunk", "6r:agent_message_chunk", "7r:agent_message_chunk", "8r:agent_message_chunk", "replay_complete"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTranscript()
			o := eventbus.Options{Epoch: "e", ReplayBufferSize: 5}
			if c.provider {
				o.Snapshots = tr.provide
			}
			b := newBus(t, o)
			for i := range c.published {
				tr.publish(t, b, "s", tok(i))
			}
			frames := readReplay(t, subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: old}))
			assert.Equal(t, c.want, describe(frames))
			d, ok := resyncOf(t, frames)
			require.True(t, ok)
			assert.Equal(t, frame.ResyncData{Reason: frame.ReasonEpochReset, LastDeliveredID: 42, Epoch: "e"}, d)
			done := decode[frame.ReplayCompleteData](t, frames[len(frames)-1])
			assert.Equal(t, c.published > 5 && !c.provider, done.HistoryLost,
				"history lost only where no snapshot stands for it: %+v", done)
		})
	}
}
