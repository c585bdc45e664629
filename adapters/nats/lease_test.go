package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// testLease is the lease of these tests: the shortest eventbus accepts
// but one (a 1 s lease is renewed every 250 ms, which a loaded machine
// may miss).
const testLease = 2 * time.Second

// turnEnds returns the turn_end records of session in b's replay buffer.
func turnEnds(t *testing.T, b *eventbus.Bus, session string) []frame.TurnData {
	t.Helper()
	s, err := b.Subscribe(context.Background(), session, eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer s.Close()
	var out []frame.TurnData
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		ev, err := s.Next(ctx)
		cancel()
		if err != nil {
			return out
		}
		if ev.Type == frame.TypeTurnEnd {
			var d frame.TurnData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
}

// kill stops n without a goodbye: its connection is closed, so that it
// neither renews its lease nor writes anything; the bus is closed later
// (its goodbye fails on the closed connection).
func kill(n *node) { n.nc.Close() }

// leaseKeys returns the keys of the lease bucket of stream.
func leaseKeys(t *testing.T, n *node, stream string) []string {
	t.Helper()
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), stream+"_LEASES")
	require.NoError(t, err)
	keys, err := kv.ListKeys(context.Background())
	require.NoError(t, err)
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	return out
}

// A node killed while it runs a turn: the other two nodes each learn it
// from the expired lease and each writes turn_end{producer_lost}; one is
// stored, within 2 × the lease, and the turn's keys are gone.
func TestTurnLostWhenNodeDies(t *testing.T) {
	t.Parallel()
	stream := fmt.Sprintf("TLease%d", streamSeq.Add(1))
	opts := uniqueStream(rbnats.WithStream(stream))
	cfg := eventbus.Options{TurnLease: testLease}
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, shared.ClientURL(), cfg, opts...)
	c := newNode(t, shared.ClientURL(), cfg, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	_, err := a.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	for _, x := range []*node{b, c} {
		syncNode(t, x.bus)
		_, ok := x.bus.Turn("s", "")
		require.True(t, ok)
	}
	killed := time.Now()
	kill(a)
	require.Eventually(t, func() bool { _, ok := b.bus.Turn("s", ""); return !ok }, 4*testLease, 10*time.Millisecond,
		"the turn is not ended for the dead node")
	took := time.Since(killed)
	t.Logf("producer_lost %v after the kill (lease %v)", took, testLease)
	assert.Less(t, took, 2*testLease)
	time.Sleep(300 * time.Millisecond) // the other node's end, refused, lands
	for _, x := range []*node{b, c} {
		syncNode(t, x.bus)
		ends := turnEnds(t, x.bus, "s")
		require.Len(t, ends, 1, "exactly one turn_end")
		assert.Equal(t, frame.ReasonProducerLost, ends[0].Reason)
	}
	assert.Equal(t, uint64(1), b.bus.Stats().TurnsLost)
	var keys []string
	assert.Eventually(t, func() bool {
		keys = leaseKeys(t, b, stream)
		for _, k := range keys {
			if strings.Contains(k, a.be.Node()) {
				return false
			}
		}
		return true
	}, 5*time.Second, 50*time.Millisecond, "the dead node's keys are purged")
	assert.Contains(t, keys, "n."+b.be.Node())
}

// Presence over NATS: a client attached on one node is seen on the other
// within a second, a node started later gets it before it serves, a
// reconnect to another node within the grace is no leave and join, and a
// dead node's clients leave within 2 × the lease.
func TestPresenceOverNATS(t *testing.T) {
	t.Parallel()
	opts := uniqueStream()
	cfg := eventbus.Options{TurnLease: testLease, PresenceGrace: 3 * time.Second}
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, shared.ClientURL(), cfg, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	syncNode(t, b.bus)
	watch, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "w", Presence: true, NoReplay: true})
	require.NoError(t, err)
	defer watch.Close()
	presence := func() frame.PresenceData {
		t.Helper()
		for {
			ev := next(t, watch)
			if ev.Type == frame.TypePresence {
				var d frame.PresenceData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				return d
			}
		}
	}
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 1, Status: "idle"}, presence())

	start := time.Now()
	onA, err := a.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "c"})
	require.NoError(t, err)
	got := presence()
	assert.Equal(t, []string{"c"}, got.Joined)
	assert.Equal(t, 2, got.Clients)
	assert.Less(t, time.Since(start), time.Second, "presence converges within 1 s")
	require.NoError(t, a.bus.SetStatus("s", "thinking"))
	assert.Equal(t, "thinking", presence().Status)

	late := newNode(t, shared.ClientURL(), cfg, opts...)
	syncNode(t, late.bus)
	p, err := late.bus.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 2, Status: "thinking"}, p, "a node that starts later has every part")

	// c moves from a to b within the grace: no leave, no join.
	onA.Close()
	onB, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "c", NoReplay: true})
	require.NoError(t, err)
	defer onB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	ev, err := watch.Next(ctx)
	cancel()
	assert.Error(t, err, "no presence frame for a reconnect within the grace: %+v", ev)

	// a dies with a client only it has: the client leaves everywhere.
	only, err := a.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "only-on-a"})
	require.NoError(t, err)
	defer only.Close()
	assert.Equal(t, []string{"only-on-a"}, presence().Joined)
	killed := time.Now()
	kill(a)
	for {
		got = presence()
		if len(got.Left) > 0 {
			break
		}
	}
	assert.Contains(t, got.Left, "only-on-a")
	assert.Less(t, time.Since(killed), 2*testLease)
	assert.Eventually(t, func() bool {
		p, err := late.bus.Presence("s")
		return err == nil && p.Clients == 2
	}, time.Second, 10*time.Millisecond, "the late node agrees: w and c")
}

// A graceful Close drops the node's leases at once: its turn ends
// (producer_lost, "bus closed") and its keys are gone, without waiting
// for the lease.
func TestCloseDropsLeases(t *testing.T) {
	t.Parallel()
	stream := fmt.Sprintf("TLeaseClose%d", streamSeq.Add(1))
	opts := uniqueStream(rbnats.WithStream(stream))
	cfg := eventbus.Options{TurnLease: 30 * time.Second}
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, shared.ClientURL(), cfg, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	sub, err := a.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Client: "c"})
	require.NoError(t, err)
	defer sub.Close()
	_, err = a.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	node := a.be.Node()
	require.Eventually(t, func() bool {
		p, err := b.bus.Presence("s")
		return err == nil && p.Clients == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, a.bus.Close())
	require.Eventually(t, func() bool {
		p, err := b.bus.Presence("s")
		_, active := b.bus.Turn("s", "")
		return err == nil && p.Clients == 0 && !active
	}, 5*time.Second, 10*time.Millisecond, "the closed node's turn and client are gone at once")
	for _, k := range leaseKeys(t, b, stream) {
		assert.NotContains(t, k, node, "a key of the closed node is left")
	}
	got, ok := b.bus.Turn("s", "t")
	require.True(t, ok)
	assert.Equal(t, frame.ReasonProducerLost, got.Reason)
	assert.Equal(t, "bus closed", got.Message)
}

// A cancel on node B reaches the producer on node A through the log (by
// id, and with cascade to a sub-agent's turn, whichever node runs it);
// every node stores one turn_end{cancelled} per turn.
func TestCancelAcrossNodes(t *testing.T) {
	t.Parallel()
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("root", ""))
	require.NoError(t, a.bus.CreateSession("sub", "root"))
	require.NoError(t, a.bus.CreateSession("subsub", "sub"))
	syncNode(t, b.bus)
	done := func(tr *eventbus.Turn) {
		t.Helper()
		select {
		case <-tr.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("turn %s: the producer's context is not cancelled", tr.ID())
		}
	}

	tr, err := a.bus.StartTurn(context.Background(), "root", eventbus.TurnOptions{ID: "one"})
	require.NoError(t, err)
	syncNode(t, b.bus)
	res, err := b.bus.Cancel(context.Background(), "root", frame.TurnData{Turn: "one"})
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, res.Cancelled)
	done(tr)
	assert.ErrorIs(t, context.Cause(tr.Context()), context.Canceled)

	// Cascade from B: the root's turn and the grandchild's run on A, the
	// child's on B itself.
	require.Eventually(t, func() bool { _, ok := a.bus.Turn("root", ""); return !ok }, 5*time.Second, time.Millisecond)
	root, err := a.bus.StartTurn(context.Background(), "root", eventbus.TurnOptions{ID: "r"})
	require.NoError(t, err)
	deep, err := a.bus.StartTurn(context.Background(), "subsub", eventbus.TurnOptions{ID: "d"})
	require.NoError(t, err)
	syncNode(t, b.bus)
	mid, err := b.bus.StartTurn(context.Background(), "sub", eventbus.TurnOptions{ID: "m"})
	require.NoError(t, err)
	res, err = b.bus.Cancel(context.Background(), "root", frame.TurnData{Cascade: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"r", "m", "d"}, res.Cancelled)
	for _, tr := range []*eventbus.Turn{root, mid, deep} {
		done(tr)
	}
	for _, x := range []*node{a, b} {
		require.Eventually(t, func() bool {
			for _, s := range []string{"root", "sub", "subsub"} {
				if _, ok := x.bus.Turn(s, ""); ok {
					return false
				}
			}
			return true
		}, 5*time.Second, time.Millisecond)
		syncNode(t, x.bus)
		for s, n := range map[string]int{"root": 2, "sub": 1, "subsub": 1} {
			ends := turnEnds(t, x.bus, s)
			require.Len(t, ends, n, "session %s", s)
			for _, e := range ends {
				assert.Equal(t, frame.ReasonCancelled, e.Reason)
			}
		}
	}
}
