package eventbus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Issue 12.8, replay storms: a large resume must not stall the publishers
// of other sessions (nor of its own). The snapshot's merge, budget and
// frames are built after the bus lock is released; here that phase is held
// open while other sessions, and the resumed one, publish. The resumed
// subscriber still gets exactly the history, then replay_complete, then the
// events published meanwhile — each once, in order.
func TestReplayStormDoesNotStallOtherSessions(t *testing.T) {
	const ring = 50_000
	b, err := New(Options{ReplayBufferSize: ring, ReplayBudgetBytes: 1 << 30})
	require.NoError(t, err)
	defer b.Close()
	for range ring {
		_, err := b.Publish("big", "t", nil)
		require.NoError(t, err)
	}
	inSnapshot, release := make(chan struct{}), make(chan struct{})
	testHookSnapshot = func(*Subscription) { close(inSnapshot); <-release }
	defer func() { testHookSnapshot = nil }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		sub *Subscription
		err error
	}
	subscribed := make(chan result, 1)
	go func() {
		sub, err := b.Subscribe(ctx, "big", SubscribeOptions{Cursor: At(0)})
		subscribed <- result{sub, err}
	}()
	<-inSnapshot

	// While the resume of 50,000 events is being finished: other sessions
	// and the resumed one publish, and lookups answer.
	published := make(chan uint64, 1)
	go func() {
		var last uint64
		for _, sess := range []string{"other", "big", "third"} {
			ev, err := b.Publish(sess, "t", nil)
			if err != nil {
				t.Error(err)
				break
			}
			last = ev.ID
		}
		published <- last
	}()
	var live uint64
	select {
	case live = <-published:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a publish waited for a resume in progress")
	}
	require.True(t, b.SessionExists("other"))
	close(release)
	r := <-subscribed
	require.NoError(t, r.err)
	defer r.sub.Close()

	for want := uint64(1); want <= ring; want++ {
		ev, err := r.sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, ev.ID)
		require.True(t, ev.Replay)
	}
	ev, err := r.sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, frame.TypeReplayComplete, ev.Type)
	ev, err = r.sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, live-1, ev.ID, "the event published to the resumed session during its resume, live, after the history")
	require.False(t, ev.Replay)
	require.Zero(t, b.Stats().Guarded)
}
