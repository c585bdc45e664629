package nats

import (
	"context"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
)

// recorder is a Feed that records what it is told.
type recorder struct {
	mu      sync.Mutex
	ingest  []uint64
	evicted map[string]uint64
	fails   []error
}

func (r *recorder) Ingest(_ []string, ev backend.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ingest = append(r.ingest, ev.ID)
}

func (r *recorder) Evicted(path []string, upTo uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evicted == nil {
		r.evicted = map[string]uint64{}
	}
	r.evicted[path[len(path)-1]] = max(r.evicted[path[len(path)-1]], upTo)
}

func (r *recorder) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, err)
}

// The lease reports: this backend has no leases yet.
func (r *recorder) TurnLost(string, string)         {}
func (r *recorder) Presence(string, string, []byte) {}

// fakeMsg is the part of jetstream.Msg that handle reads.
type fakeMsg struct {
	jetstream.Msg
	subject string
	data    []byte
}

func (m fakeMsg) Subject() string { return m.subject }
func (m fakeMsg) Data() []byte    { return m.data }

// lagBackend returns a backend (not started) on a stream with
// MaxMsgsPerSubject 5 where session "full" got 12 events (1…7 deleted,
// 8…12 kept) and session "small" got 2 (13, 14).
func lagBackend(t *testing.T) (*Backend, *recorder) {
	srv, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := natsgo.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	be, err := NewBackend(context.Background(), nc, eventbus.Options{ReplayBufferSize: 5}, WithStorage(jetstream.MemoryStorage), WithRetention(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Close() })
	for i := 0; i < 12; i++ {
		_, err := be.Append(context.Background(), []string{"full"}, backend.Record{Type: "m", Time: time.Now()})
		require.NoError(t, err)
	}
	for i := 0; i < 2; i++ {
		_, err := be.Append(context.Background(), []string{"root", "small"}, backend.Record{Type: "m", Time: time.Now()})
		require.NoError(t, err)
	}
	rec := &recorder{}
	be.feed = rec
	return be, rec
}

func msgFor(t *testing.T, path ...string) fakeMsg {
	return fakeMsg{subject: subjectFor(DefaultSubjectPrefix, path), data: appendEnvelope(nil, "m", 1, "", "", nil)}
}

// TestLagMarksFullSessions: a node that skipped deleted sequences while
// live marks every full session as evicted up to the gap, and only those.
func TestLagMarksFullSessions(t *testing.T) {
	be, rec := lagBackend(t)
	be.processed.Store(3) // the node had read 1…3, then fell behind
	plan := be.handle(msgFor(t, "full"), 8, nil)
	assert.Nil(t, plan)
	assert.Equal(t, map[string]uint64{"full": 7}, rec.evicted)
	assert.Equal(t, []uint64{8}, rec.ingest)
	// No gap, no more marks.
	rec.evicted = nil
	be.handle(msgFor(t, "full"), 9, nil)
	assert.Nil(t, rec.evicted)
}

// TestCatchUpMarksFirstOfFullSessions: a node starting on the stream marks
// a full session as evicted before its first retained event, and nothing
// else, when nothing was deleted during the catch-up.
func TestCatchUpMarksFirstOfFullSessions(t *testing.T) {
	be, rec := lagBackend(t)
	plan := &catchUp{last: 14, expected: 7, full: map[string]bool{subjectFor(DefaultSubjectPrefix, []string{"full"}): true}}
	for seq := uint64(8); seq <= 12; seq++ {
		plan = be.handle(msgFor(t, "full"), seq, plan)
	}
	plan = be.handle(msgFor(t, "root", "small"), 13, plan)
	require.NotNil(t, plan)
	plan = be.handle(msgFor(t, "root", "small"), 14, plan)
	assert.Nil(t, plan, "caught up")
	assert.Equal(t, map[string]uint64{"full": 7}, rec.evicted)
	assert.Equal(t, []uint64{8, 9, 10, 11, 12, 13, 14}, rec.ingest)
}

// TestCatchUpNoticesDeletions: more sequences skipped during the catch-up
// than were missing at start means events were deleted meanwhile: full
// sessions are marked up to the stream's last sequence at start.
func TestCatchUpNoticesDeletions(t *testing.T) {
	be, rec := lagBackend(t)
	plan := &catchUp{last: 14, expected: 5, full: map[string]bool{}}
	plan = be.handle(msgFor(t, "full"), 8, plan) // 1…7 skipped: 2 more than expected
	plan = be.handle(msgFor(t, "root", "small"), 14, plan)
	assert.Nil(t, plan)
	assert.Equal(t, map[string]uint64{"full": 7}, rec.evicted, "up to its first retained event")
}
