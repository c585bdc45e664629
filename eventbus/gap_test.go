package eventbus_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// A gap the feed notices (Evicted past the next expected id) reaches every
// live subscriber in scope as state_resync_required{feed_gap} at that point
// of its stream; subscribers of other sessions hear nothing, and a mark
// below what the node already ingested (nothing newly lost) is silent.
func TestFeedGapReachesLiveSubscribersInScope(t *testing.T) {
	t.Parallel()
	b, fb := newFedBus(t)
	fb.ingest(1, "_replaybus.session_created", "root")
	fb.ingest(2, "_replaybus.session_created", "root", "kid")
	fb.ingest(3, "msg", "root", "kid")
	fb.ingest(4, "msg", "other")
	own := subscribe(t, b, "kid", eventbus.SubscribeOptions{NoReplay: true})
	desc := subscribe(t, b, "root", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	all := subscribe(t, b, "other", eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true})
	other := subscribe(t, b, "other", eventbus.SubscribeOptions{NoReplay: true})

	fb.feed.Evicted([]string{"root", "kid"}, 3) // already ingested: nothing new lost
	fb.feed.Evicted([]string{"root", "kid"}, 9) // 5…9 never ingested
	fb.feed.Evicted([]string{"root", "kid"}, 8) // the same gap again: one frame
	fb.ingest(10, "msg", "root", "kid")
	for name, s := range map[string]*eventbus.Subscription{"own": own, "descendants": desc, "all": all} {
		got := readN(t, s, 2)
		assert.Equal(t, []string{"state_resync_required:feed_gap", "10"}, describe(got), name)
		d := decode[frame.ResyncData](t, got[0])
		assert.Equal(t, frame.ResyncData{Reason: frame.ReasonFeedGap, LastDeliveredID: 0, CompleteFromID: 10}, d, name)
	}
	assert.Empty(t, drain(other), "another session lost nothing")
	assert.Equal(t, uint64(3), b.Stats().Resyncs)

	// lastDeliveredId is what the subscriber really had.
	fb.feed.Evicted([]string{"root", "kid"}, 12)
	fb.ingest(13, "msg", "root", "kid")
	got := readN(t, own, 2)
	assert.Equal(t, frame.ResyncData{Reason: frame.ReasonFeedGap, LastDeliveredID: 10, CompleteFromID: 13}, decode[frame.ResyncData](t, got[0]))

	// A resume from before the gap is told too (ring_evicted).
	r := subscribe(t, b, "kid", eventbus.SubscribeOptions{Cursor: eventbus.At(3)})
	assert.Equal(t, "state_resync_required:ring_evicted", describe(readN(t, r, 1))[0])
}

// asyncBackend is a fake AsyncBackend: ids from a counter, acks released
// by the test, and a failure injected at one event.
type asyncBackend struct {
	fakeBackend
	mu      sync.Mutex
	next    uint64
	failAt  uint64 // the n-th append fails (its fate unknown); 0: none
	sent    int
	release chan struct{} // closed: acks flow
}

type fakePending struct {
	id      uint64
	err     error
	release chan struct{}
}

func (p fakePending) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-p.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return p.id, p.err
}

func (a *asyncBackend) AppendAsync(_ []string, ev backend.Record) (backend.PendingAppend, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent++
	if uint64(a.sent) == a.failAt {
		return fakePending{err: errors.New("ack timeout"), release: a.release}, nil
	}
	a.next++
	return fakePending{id: a.next, release: a.release}, nil
}

// A pipeline keeps at most Window events in flight, reports stored events
// in order with their ids, and on a failure names exactly the events whose
// fate is unknown; the pipeline is usable afterwards.
func TestPipelineWindowAndFailure(t *testing.T) {
	t.Parallel()
	fb := &asyncBackend{release: make(chan struct{})}
	b, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, fb)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	_, err = eventbus.NewPipeline(b, eventbus.PipelineOptions{Window: 4096 + 1})
	require.ErrorIs(t, err, eventbus.ErrInvalid)

	var stored []eventbus.Event
	p, err := eventbus.NewPipeline(b, eventbus.PipelineOptions{Window: 3, OnStored: func(ev eventbus.Event) { stored = append(stored, ev) }})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, p.Publish("s", "msg", i))
	}
	assert.Empty(t, stored, "three in flight, none acknowledged yet")
	// A full window: the fourth waits for the oldest ack.
	done := make(chan error, 1)
	go func() { done <- p.Publish("s", "msg", 3) }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.Flush(ctx), context.Canceled, "Flush gives up with its context")
	close(fb.release)
	require.NoError(t, <-done)
	require.NoError(t, p.Flush(context.Background()))
	require.Len(t, stored, 4)
	for i, ev := range stored {
		assert.Equal(t, uint64(i+1), ev.ID)
		assert.Equal(t, "s", ev.Session)
	}
	// Bad input is refused at once and consumes nothing.
	assert.ErrorIs(t, p.Publish("s", frame.TypeReplayComplete, nil), eventbus.ErrInvalid)

	// The 6th append fails: it is unknown, 5 and 7 are stored.
	fb.mu.Lock()
	fb.failAt = 6
	fb.mu.Unlock()
	stored = nil
	for i := range 3 {
		require.NoError(t, p.Publish("s", "msg", 10+i))
	}
	err = p.Flush(context.Background())
	var perr *eventbus.PipelineError
	require.ErrorAs(t, err, &perr)
	require.Len(t, perr.Unknown, 1)
	assert.JSONEq(t, `11`, string(perr.Unknown[0].Data))
	assert.Equal(t, []uint64{5, 6}, []uint64{stored[0].ID, stored[1].ID})
	stored = nil
	require.NoError(t, p.Publish("s", "msg", 20))
	require.NoError(t, p.Flush(context.Background()))
	require.Len(t, stored, 1, "the pipeline is empty and usable after the failure")
	assert.JSONEq(t, `20`, string(stored[0].Data))
}

// On the in-memory bus a pipeline publishes synchronously.
func TestPipelineInMemory(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	var ids []uint64
	p, err := eventbus.NewPipeline(b, eventbus.PipelineOptions{OnStored: func(ev eventbus.Event) { ids = append(ids, ev.ID) }})
	require.NoError(t, err)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	for i := range 5 {
		require.NoError(t, p.Publish("s", "msg", i))
	}
	require.NoError(t, p.Flush(context.Background()))
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, ids)
	assert.Equal(t, []string{"1", "2", "3", "4", "5"}, describe(readN(t, s, 5)))
}

// A pipeline publish takes the options Bus.Publish takes, over a backend as
// in memory: with Existing an unknown session is ErrSessionNotFound and is
// not created (the example server's POST relies on it to refuse a typo),
// and WithOrigin reaches the stored event.
func TestPipelineKeepsPublishOptions(t *testing.T) {
	t.Parallel()
	fb := &asyncBackend{release: make(chan struct{})}
	close(fb.release)
	remote, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, fb)
	require.NoError(t, err)
	t.Cleanup(func() { remote.Close() })
	for name, b := range map[string]*eventbus.Bus{"backend": remote, "memory": newBus(t, eventbus.Options{})} {
		var stored []eventbus.Event
		p, err := eventbus.NewPipeline(b, eventbus.PipelineOptions{OnStored: func(ev eventbus.Event) { stored = append(stored, ev) }})
		require.NoError(t, err)
		err = p.Publish("typo", "msg", 1, eventbus.Existing())
		assert.ErrorIs(t, err, eventbus.ErrSessionNotFound, name)
		assert.False(t, b.SessionExists("typo"), "%s: Existing creates nothing", name)
		require.NoError(t, p.Publish("s", "msg", 2, nil, eventbus.WithOrigin("me")), name)
		require.NoError(t, p.Flush(context.Background()), name)
		require.Len(t, stored, 1, name)
		assert.Equal(t, "me", stored[0].Origin, name)
	}
}
