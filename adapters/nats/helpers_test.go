package nats_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// shared is the embedded server most tests use; each test gets its own
// stream and subject prefix on it.
var shared *embedded.Server

func TestMain(m *testing.M) {
	s, err := embedded.RunServer(embedded.ServerConfig{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = s
	code := m.Run()
	s.Shutdown()
	if code == 0 {
		// Everything the package and the servers started must be gone.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var streamSeq atomic.Int64

// uniqueStream returns options for a stream and prefix no other test uses.
// withRetention adds rbnats.WithRetention(n) to opts unless n is 0 (the
// default retention).
func withRetention(n int, opts []rbnats.Option) []rbnats.Option {
	if n == 0 {
		return opts
	}
	return append(opts, rbnats.WithRetention(n))
}

func uniqueStream(extra ...rbnats.Option) []rbnats.Option {
	n := streamSeq.Add(1)
	return append([]rbnats.Option{
		rbnats.WithStream(fmt.Sprintf("T%d", n)),
		rbnats.WithSubjectPrefix(fmt.Sprintf("t%d", n)),
		rbnats.WithStorage(jetstream.MemoryStorage),
		rbnats.WithHeartbeat(500 * time.Millisecond),
	}, extra...)
}

// node is one bus node with its own connection.
type node struct {
	bus *eventbus.Bus
	be  *rbnats.Backend
	nc  *natsgo.Conn
}

var (
	nodesMu sync.Mutex
	nodes   = map[*eventbus.Bus]*node{}
)

// newNode starts a bus node on url (closed at the end of the test).
func newNode(t testing.TB, url string, cfg eventbus.Options, opts ...rbnats.Option) *node {
	t.Helper()
	return newNodeOpts(t, url, cfg, nil, opts...)
}

// newNodeOpts is newNode with connection options.
func newNodeOpts(t testing.TB, url string, cfg eventbus.Options, copts []natsgo.Option, opts ...rbnats.Option) *node {
	t.Helper()
	copts = append([]natsgo.Option{natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100 * time.Millisecond),
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {})}, copts...)
	nc, err := natsgo.Connect(url, copts...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	be, err := rbnats.NewBackend(ctx, nc, cfg, opts...)
	require.NoError(t, err)
	b, err := eventbus.NewWithBackend(ctx, cfg, be)
	require.NoError(t, err)
	n := &node{bus: b, be: be, nc: nc}
	nodesMu.Lock()
	nodes[b] = n
	nodesMu.Unlock()
	t.Cleanup(func() {
		_ = b.Close()
		nc.Close()
		nodesMu.Lock()
		delete(nodes, b)
		nodesMu.Unlock()
	})
	return n
}

// syncNode waits until the node ingested everything in its stream.
func syncNode(t testing.TB, b *eventbus.Bus) {
	t.Helper()
	nodesMu.Lock()
	n := nodes[b]
	nodesMu.Unlock()
	require.NotNil(t, n, "not a node of this test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, n.be.Sync(ctx))
}

// next reads one frame within 10 s (the eventbus tests' helper).
var next = testkit.Next

// readIDs reads frames until n real events arrived and returns their ids
// and the synthetic frames' types in order of arrival.
func readIDs(t testing.TB, s *eventbus.Subscription, n int) (ids []uint64, frames []string) {
	t.Helper()
	for len(ids) < n {
		ev := next(t, s)
		if ev.ID == 0 {
			frames = append(frames, ev.Type)
			continue
		}
		ids = append(ids, ev.ID)
	}
	return ids, frames
}

// checkStrict fails unless ids rise strictly.
func checkStrict(t testing.TB, ids []uint64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ids not strictly increasing at %d: %d then %d", i, ids[i-1], ids[i])
		}
	}
}
