package eventbus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
)

// cluster is a backend several buses share in one process, as nodes
// share NATS: one log with one id sequence, fed to every node's Feed in id
// order by a goroutine per node, and leases — a node's turns and presence
// parts — that the test expires by killing the node (no goodbye: its
// feed stops, its appends fail, and the others are told).
type cluster struct {
	mu       sync.Mutex
	log      []stored
	nodes    []*node
	leases   map[[2]string]*node         // session, turn → holder
	presence map[*node]map[string][]byte // node → session → part
}

type stored struct {
	path []string
	ev   backend.Record
}

// node is one bus's view of the cluster: its Backend.
type node struct {
	c      *cluster
	name   string
	feed   backend.Feed
	next   int // index of the next stored event to feed
	wake   chan struct{}
	gate   sync.Mutex // held around each batch fed; a test holds it to stall the feed
	stop   chan struct{}
	done   chan struct{}
	killed bool
	closed bool
}

var errKilled = errors.New("node killed")

func newCluster() *cluster {
	return &cluster{leases: map[[2]string]*node{}, presence: map[*node]map[string][]byte{}}
}

// join starts a bus over the cluster as node name, closed with the test.
func (c *cluster) join(t *testing.T, name string, o eventbus.Options) (*eventbus.Bus, *node) {
	t.Helper()
	b, n, err := c.start(name, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b, n
}

// start starts a bus over the cluster as node name; the caller closes it.
func (c *cluster) start(name string, o eventbus.Options) (*eventbus.Bus, *node, error) {
	n := &node{c: c, name: name, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	b, err := eventbus.NewWithBackend(context.Background(), o, n)
	return b, n, err
}

// logLen is the number of events stored.
func (c *cluster) logLen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint64(len(c.log))
}

func (n *node) Epoch() string { return "cluster" }

func (n *node) Append(_ context.Context, path []string, ev backend.Record) (uint64, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.killed || n.closed {
		return 0, errKilled
	}
	ev.ID = uint64(len(c.log) + 1)
	c.log = append(c.log, stored{path: append([]string(nil), path...), ev: ev})
	for _, m := range c.nodes {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	return ev.ID, nil
}

func (n *node) LastID(context.Context) (uint64, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return uint64(len(n.c.log)), nil
}

func (n *node) Start(_ context.Context, feed backend.Feed) error {
	n.feed = feed
	go n.run()
	return nil
}

// run feeds the stored events in id order until the node stops.
func (n *node) run() {
	defer close(n.done)
	for {
		n.gate.Lock()
		n.c.mu.Lock()
		batch := n.c.log[n.next:]
		n.next = len(n.c.log)
		n.c.mu.Unlock()
		for _, s := range batch {
			n.feed.Ingest(s.path, s.ev)
		}
		n.gate.Unlock()
		select {
		case <-n.stop:
			return
		case <-n.wake:
		}
	}
}

func (n *node) Close() error {
	n.c.mu.Lock()
	already := n.closed
	n.closed = true
	for k, h := range n.c.leases {
		if h == n {
			delete(n.c.leases, k)
		}
	}
	n.c.mu.Unlock()
	if !already {
		close(n.stop)
		<-n.done
	}
	return nil
}

func (n *node) HoldTurn(_ context.Context, session, turn string, _ time.Duration) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if n.killed {
		return errKilled
	}
	n.c.leases[[2]string{session, turn}] = n
	return nil
}

func (n *node) ReleaseTurn(_ context.Context, session, turn string) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	delete(n.c.leases, [2]string{session, turn})
	return nil
}

func (n *node) SharePresence(_ context.Context, session string, part []byte, _ time.Duration) error {
	c := n.c
	c.mu.Lock()
	if n.killed {
		c.mu.Unlock()
		return errKilled
	}
	if c.presence[n] == nil {
		c.presence[n] = map[string][]byte{}
	}
	c.presence[n][session] = part
	others := c.others(n)
	c.mu.Unlock()
	for _, m := range others {
		m.feed.Presence(n.name, session, part)
	}
	return nil
}

// others returns the live nodes but n. c.mu is held.
func (c *cluster) others(n *node) []*node {
	var out []*node
	for _, m := range c.nodes {
		if m != n && !m.killed && !m.closed {
			out = append(out, m)
		}
	}
	return out
}

// kill stops n without a goodbye: its feed stops, its appends fail, and
// the other nodes are told its leases expired — each turn twice, by
// every live node, as a backend whose nodes all watch the leases would.
func (c *cluster) kill(n *node) {
	c.mu.Lock()
	n.killed = true
	var lost [][2]string
	for k, h := range c.leases {
		if h == n {
			lost = append(lost, k)
			delete(c.leases, k)
		}
	}
	parts := c.presence[n]
	delete(c.presence, n)
	others := c.others(n)
	c.mu.Unlock()
	close(n.stop)
	<-n.done
	for _, m := range others {
		for _, k := range lost {
			m.feed.TurnLost(k[0], k[1])
			m.feed.TurnLost(k[0], k[1])
		}
		for session := range parts {
			m.feed.Presence(n.name, session, nil)
		}
	}
	n.c.mu.Lock()
	n.closed = true
	n.c.mu.Unlock()
}
