package eventbus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// fakeBackend lets a test play the feed of a distributed backend by hand.
type fakeBackend struct {
	mu   sync.Mutex
	feed backend.Feed
}

func (f *fakeBackend) Epoch() string { return "fake" }
func (f *fakeBackend) Append(context.Context, []string, backend.Record) (uint64, error) {
	return 0, eventbus.ErrClosed
}
func (f *fakeBackend) Start(_ context.Context, feed backend.Feed) error {
	f.mu.Lock()
	f.feed = feed
	f.mu.Unlock()
	return nil
}
func (f *fakeBackend) Close() error { return nil }

func (f *fakeBackend) ingest(id uint64, typ string, path ...string) {
	f.feed.Ingest(path, backend.Record{ID: id, Type: typ, Time: time.Unix(0, int64(id))})
}

func newFedBus(t *testing.T) (*eventbus.Bus, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	b, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, fb)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b, fb
}

// An event whose tree path still names an ancestor closed in the meantime
// (published by a node that had not seen the close yet) reaches the live
// child; nothing is dropped unannounced.
func TestIngestUnderClosedAncestor(t *testing.T) {
	t.Parallel()
	b, fb := newFedBus(t)
	fb.ingest(1, "msg", "P", "C")
	s := subscribe(t, b, "C", eventbus.SubscribeOptions{Cursor: eventbus.At(1)})
	fb.ingest(2, frame.TypeSessionClosed, "P")
	fb.ingest(3, "msg", "P", "C")
	assert.Equal(t, []string{"replay_complete", "3"}, describe(readN(t, s, 2)))
	assert.True(t, b.SessionExists("C"))
	assert.False(t, b.SessionExists("P"))
}

// A closed id that the stream later carries events for again (its id was
// reused after its tombstone expired elsewhere) lives again on every node,
// so a node that replays the stream from the start gets the same history;
// a second session_closed for a closed session is ignored.
func TestIngestReusedID(t *testing.T) {
	t.Parallel()
	b, fb := newFedBus(t)
	fb.ingest(1, "msg", "s")
	fb.ingest(2, frame.TypeSessionClosed, "s")
	fb.ingest(3, frame.TypeSessionClosed, "s")
	fb.ingest(4, "msg", "s")
	require.True(t, b.SessionExists("s"))
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: eventbus.At(2)})
	assert.Equal(t, []string{"4r", "replay_complete"}, describe(drain(s)))
}
