package nats_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// TestThreeNodes: three bus nodes on one JetStream server; 3000 events
// published over the three into one session tree reach the session and
// descendants subscribers of every node as the same strictly increasing id
// sequences, without gap or duplicate.
func TestThreeNodes(t *testing.T) {
	const total = 3000
	cfg := eventbus.Options{ReplayBufferSize: total, MaxQueueSize: 2 * total}
	opts := uniqueStream()
	ns := []*node{newNode(t, shared.ClientURL(), cfg, opts...), newNode(t, shared.ClientURL(), cfg, opts...), newNode(t, shared.ClientURL(), cfg, opts...)}
	for _, n := range ns[1:] {
		require.Equal(t, ns[0].bus.Epoch(), n.bus.Epoch(), "one stream, one epoch")
	}
	// The tree, made on different nodes; ids that need escaping.
	root, kids := "job.1 root", []string{"agent *a", "agent >b", "ünï/c"}
	require.NoError(t, ns[0].bus.CreateSession(root, ""))
	syncNode(t, ns[1].bus)
	syncNode(t, ns[2].bus)
	for i, k := range kids {
		n := ns[i]
		syncNode(t, n.bus)
		require.NoError(t, n.bus.CreateSession(k, root))
	}
	require.NoError(t, ns[1].bus.CreateSession("grand.child", kids[0]))
	for _, n := range ns {
		syncNode(t, n.bus)
	}
	sessions := append([]string{root, "grand.child"}, kids...)

	type pair struct{ own, desc *eventbus.Subscription }
	subs := make([]pair, len(ns))
	for i, n := range ns {
		own, err := n.bus.Subscribe(context.Background(), root, eventbus.SubscribeOptions{NoReplay: true})
		require.NoError(t, err)
		desc, err := n.bus.Subscribe(context.Background(), root, eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
		require.NoError(t, err)
		subs[i] = pair{own, desc}
		t.Cleanup(own.Close)
		t.Cleanup(desc.Close)
	}

	var (
		mu      sync.Mutex
		rootIDs = map[uint64]bool{}
		allIDs  = map[uint64]bool{}
		wg      sync.WaitGroup
	)
	errs := make(chan error, len(ns))
	for w, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += len(ns) {
				sess := sessions[i%len(sessions)]
				ev, err := n.bus.Publish(sess, "msg", map[string]int{"i": i + 1})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				allIDs[ev.ID] = true
				if sess == root {
					rootIDs[ev.ID] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, allIDs, total)

	var firstOwn, firstDesc []uint64
	for i, p := range subs {
		own, fo := readIDs(t, p.own, len(rootIDs))
		desc, fd := readIDs(t, p.desc, total)
		assert.Empty(t, fo, "node %d: frames on the session subscriber", i)
		assert.Empty(t, fd, "node %d: frames on the descendants subscriber", i)
		checkStrict(t, own)
		checkStrict(t, desc)
		for _, id := range own {
			require.True(t, rootIDs[id], "node %d: id %d not published to the root", i, id)
		}
		for _, id := range desc {
			require.True(t, allIDs[id], "node %d: id %d never published", i, id)
		}
		if i == 0 {
			firstOwn, firstDesc = own, desc
			continue
		}
		assert.Equal(t, firstOwn, own, "node %d: session sequence differs from node 0", i)
		assert.Equal(t, firstDesc, desc, "node %d: descendants sequence differs from node 0", i)
		assert.Zero(t, ns[i].bus.Stats().Guarded)
	}
}

// TestFailover: a client reads half a session on node B, B closes, the
// client resumes on node C with its last id and gets exactly the rest,
// while node A keeps publishing.
func TestFailover(t *testing.T) {
	const total = 400
	cfg := eventbus.Options{ReplayBufferSize: total, MaxQueueSize: 2 * total}
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, shared.ClientURL(), cfg, opts...)
	c := newNode(t, shared.ClientURL(), cfg, opts...)

	var (
		mu        sync.Mutex
		published []uint64
	)
	publishN := func(n int) {
		for i := 0; i < n; i++ {
			ev, err := a.bus.Publish("s", "msg", i)
			require.NoError(t, err)
			mu.Lock()
			published = append(published, ev.ID)
			mu.Unlock()
		}
	}
	publishN(total / 4)
	sub, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); publishN(3 * total / 4) }()
	got, _ := readIDs(t, sub, total/2)
	require.NoError(t, b.bus.Close())
	// The client gets what B had queued, then the end.
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			require.ErrorIs(t, err, eventbus.ErrClosed)
			break
		}
		got = append(got, ev.ID)
	}
	last := got[len(got)-1]
	require.Less(t, len(got), total, "B closed before the end")

	resumed, err := c.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: last, Epoch: b.bus.Epoch()}})
	require.NoError(t, err)
	defer resumed.Close()
	<-done
	rest, frames := readIDs(t, resumed, total-len(got))
	assert.Equal(t, []string{frame.TypeReplayComplete}, frames, "no resync frame")
	all := append(got, rest...)
	checkStrict(t, all)
	assert.Equal(t, published, all, "first half on B + rest on C = everything, once")
}

// TestRingEviction: MaxMsgsPerSubject=5, 12 events, cursor 3 gets
// ring_evicted{completeFromId: 8} as with the memory bus — on the
// node that saw all 12 and on one started after JetStream dropped 1…7.
func TestRingEviction(t *testing.T) {
	cfg := eventbus.Options{ReplayBufferSize: 5}
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	var e, small []uint64
	for i := 0; i < 12; i++ {
		ev, err := a.bus.Publish("full", "msg", i)
		require.NoError(t, err)
		e = append(e, ev.ID)
		if i%4 == 0 {
			ev, err := a.bus.Publish("small", "msg", i)
			require.NoError(t, err)
			small = append(small, ev.ID)
		}
	}
	late := newNode(t, shared.ClientURL(), cfg, opts...)
	for name, n := range map[string]*node{"running": a, "late": late} {
		t.Run(name, func(t *testing.T) {
			syncNode(t, n.bus)
			sub, err := n.bus.Subscribe(context.Background(), "full", eventbus.SubscribeOptions{Cursor: eventbus.At(e[2])})
			require.NoError(t, err)
			defer sub.Close()
			ev := next(t, sub)
			require.Equal(t, frame.TypeStateResyncRequired, ev.Type)
			assert.JSONEq(t, fmt.Sprintf(`{"reason":"ring_evicted","lastDeliveredId":%d,"completeFromId":%d}`, e[2], e[7]), string(ev.Data))
			ids, frames := readIDs(t, sub, 5)
			assert.Equal(t, e[7:], ids)
			assert.Empty(t, frames)
			assert.Equal(t, frame.TypeReplayComplete, next(t, sub).Type)

			// A session below the limit lost nothing: no resync.
			sub2, err := n.bus.Subscribe(context.Background(), "small", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
			require.NoError(t, err)
			defer sub2.Close()
			ids, frames = readIDs(t, sub2, len(small))
			assert.Equal(t, small, ids)
			assert.Empty(t, frames)
		})
	}
}

// TestSubjects: events land on the subject that spells the session's
// tree path, ids escaped.
func TestSubjects(t *testing.T) {
	prefix := fmt.Sprintf("subj.test%d", streamSeq.Add(1))
	opts := uniqueStream(rbnats.WithSubjectPrefix(prefix))
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, n.bus.CreateSession("r.1", ""))
	require.NoError(t, n.bus.CreateSession("c *>", "r.1"))
	ev, err := n.bus.Publish("c *>", "msg", 1)
	require.NoError(t, err)
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), n.be.Stream())
	require.NoError(t, err)
	m, err := st.GetLastMsgForSubject(context.Background(), prefix+".r%2E1.c%20%2A%3E")
	require.NoError(t, err)
	assert.Equal(t, ev.ID, m.Sequence)
}

// TestPublishErrors: publishing with the server gone is an error, never a
// panic, and so is an event over the payload limit.
func TestPublishErrors(t *testing.T) {
	srv, err := embedded.RunServer(embedded.ServerConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Shutdown()
	n := newNode(t, srv.ClientURL(), eventbus.Options{}, uniqueStream(rbnats.WithPublishTimeout(300*time.Millisecond))...)
	_, err = n.bus.Publish("s", "big", strings.Repeat("x", 2<<20))
	assert.Error(t, err, "over the payload limit")
	srv.Stop()
	// While the server is down every publish fails within its deadline:
	// at once, and once the node is reconnecting and its stream
	// unconfirmed.
	for i := 0; i < 5; i++ {
		ch := make(chan error, 1)
		go func() { _, err := n.bus.Publish("s", "msg", i); ch <- err }()
		select {
		case err := <-ch:
			assert.Error(t, err)
		case <-time.After(3 * time.Second):
			t.Fatalf("publish %d while the server is down still blocked after 3 s (publish timeout 300 ms)", i)
		}
		if i == 0 {
			require.Eventually(t, n.nc.IsReconnecting, 10*time.Second, time.Millisecond,
				"the node's connection notices the server is gone")
		}
	}
	assert.NoError(t, n.bus.Close())
}

// TestLongSubjectRefused: a tree path whose subject would exceed what the
// server accepts on a control line is refused with ErrInvalid, and the
// node's connection (and every other session on it) carries on.
func TestLongSubjectRefused(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	parent := ""
	var err error
	for d := 0; d < 6 && err == nil; d++ {
		id := strings.Repeat(".", 255) + string(rune('a'+d))
		if err = a.bus.CreateSession(id, parent); err == nil {
			parent = id
		}
	}
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.True(t, a.nc.IsConnected())
	ev, err := a.bus.Publish("other", "msg", 1)
	require.NoError(t, err)
	assert.NotZero(t, ev.ID)
}

// TestConnect: Connect dials a URL, the bus owns the connection, and two
// buses made with New and Connect share one stream and one epoch.
func TestConnect(t *testing.T) {
	opts := uniqueStream()
	ctx := context.Background()
	b1, err := rbnats.Connect(ctx, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, err)
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b2, err := rbnats.New(ctx, n.nc, eventbus.Options{}, opts...)
	require.NoError(t, err)
	assert.Equal(t, b1.Epoch(), b2.Epoch())
	sub, err := b2.Subscribe(ctx, "s", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	ev, err := b1.Publish("s", "msg", 1)
	require.NoError(t, err)
	assert.Equal(t, ev.ID, next(t, sub).ID)
	require.NoError(t, b1.Close())
	require.NoError(t, b2.Close())
	assert.True(t, n.nc.IsConnected(), "New leaves the caller's connection open")

	_, err = rbnats.Connect(ctx, shared.ClientURL(), eventbus.Options{}, rbnats.WithStream("bad name"))
	assert.ErrorContains(t, err, "bad name")
	// A heartbeat nats.go's pull consumer would refuse is refused here,
	// not left to a consumer that never starts.
	_, err = rbnats.Connect(ctx, shared.ClientURL(), eventbus.Options{}, rbnats.WithHeartbeat(time.Minute))
	assert.ErrorContains(t, err, "heartbeat 1m0s out of range [500ms, 30s]")
	_, err = rbnats.Connect(ctx, shared.ClientURL(), eventbus.Options{}, rbnats.WithRetention(0))
	assert.ErrorContains(t, err, "retention 0 out of range [1, 1000]")
	_, err = rbnats.Connect(ctx, shared.ClientURL(), eventbus.Options{ReplayBufferSize: -1})
	assert.Error(t, err)
}

// TestCloseAcrossNodes: CloseSession on node A ends the session's
// subscribers on node B (after session_closed), a descendants subscriber of
// its parent on B goes on, and B refuses publishes to it.
func TestCloseAcrossNodes(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("parent", ""))
	require.NoError(t, a.bus.CreateSession("kid", "parent"))
	syncNode(t, b.bus)
	own, err := b.bus.Subscribe(context.Background(), "kid", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer own.Close()
	desc, err := b.bus.Subscribe(context.Background(), "parent", eventbus.SubscribeOptions{Scope: scope.Descendants})
	require.NoError(t, err)
	defer desc.Close()
	ev, err := a.bus.Publish("kid", "msg", 1)
	require.NoError(t, err)
	require.NoError(t, a.bus.CloseSession("kid"))
	for _, sub := range []*eventbus.Subscription{own, desc} {
		assert.Equal(t, ev.ID, next(t, sub).ID)
		assert.Equal(t, frame.TypeSessionClosed, next(t, sub).Type)
	}
	_, err = own.Next(context.Background())
	assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
	_, err = b.bus.Publish("kid", "msg", 2)
	assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
	more, err := b.bus.Publish("parent", "msg", 3)
	require.NoError(t, err)
	assert.Equal(t, more.ID, next(t, desc).ID)
}

// TestMaxAge: events that aged out of the stream (WithMaxAge) are announced
// to a resume on a node that starts afterwards, though the session never
// reached MaxMsgsPerSubject.
func TestMaxAge(t *testing.T) {
	cfg := eventbus.Options{ReplayBufferSize: 100}
	stream := fmt.Sprintf("TMaxAge%d", streamSeq.Add(1))
	opts := uniqueStream(rbnats.WithMaxAge(time.Second), rbnats.WithStream(stream))
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	old, err := a.bus.Publish("aged", "msg", 1)
	require.NoError(t, err)
	// Wait until JetStream has aged the event out (MaxAge 1 s).
	js, err := jetstream.New(a.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}, 15*time.Second, 100*time.Millisecond, "the event never aged out")
	fresh, err := a.bus.Publish("aged", "msg", 2)
	require.NoError(t, err)

	late := newNode(t, shared.ClientURL(), cfg, opts...)
	syncNode(t, late.bus)
	sub, err := late.bus.Subscribe(context.Background(), "aged", eventbus.SubscribeOptions{Cursor: eventbus.At(old.ID - 1)})
	require.NoError(t, err)
	defer sub.Close()
	ev := next(t, sub)
	require.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	assert.JSONEq(t, fmt.Sprintf(`{"reason":"ring_evicted","lastDeliveredId":%d,"completeFromId":%d}`, old.ID-1, fresh.ID), string(ev.Data))
	ids, _ := readIDs(t, sub, 1)
	assert.Equal(t, []uint64{fresh.ID}, ids)
}
