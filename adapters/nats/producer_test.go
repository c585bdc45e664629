package nats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/internal/testkit"
)

// Idempotent producers over NATS JetStream: the record of each producer
// lives in the stream (one subject per session and producer), and a
// stamped publish is one atomic batch of the event and the new record
// under an expected-last-subject-sequence check (producer.go). These are
// the memory bus's producer tests (eventbus/producer_test.go) over NATS,
// across nodes and restarts.

// storedIDs waits until n has ingested its stream and returns the ids of
// the events session's replay buffer holds.
func storedIDs(t *testing.T, n *node, session string) []uint64 {
	t.Helper()
	syncNode(t, n.bus)
	return testkit.ReplayIDs(t, n.bus, session)
}

// stamped publishes data to session as producer p.
func stamped(b *eventbus.Bus, session string, p producer.Stamp, data string) (eventbus.Event, error) {
	return b.PublishJSON(session, "msg", []byte(data), eventbus.WithProducer(p))
}

// A publish whose ack was lost (the batch reached JetStream, the producer
// never heard) is retried: the retry is acknowledged with ErrDuplicate
// naming the stored event, and the event is stored once.
func TestProducerRetryAfterLostAckIsStoredOnceOverNATS(t *testing.T) {
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, uniqueStream()...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	p := producer.Stamp{ID: "writer-1", Epoch: 0, Seq: 0}
	// The first attempt: stored by the backend, its answer lost on the way.
	st, rev, err := n.be.ProducerState(context.Background(), "s", p.ID)
	require.NoError(t, err)
	require.Zero(t, rev, "no record yet")
	require.Zero(t, st)
	first, _, err := n.be.AppendProducer(context.Background(), []string{"s"},
		backend.Record{Type: "msg", Data: []byte(`{"n":1}`), Time: time.Now()}, p, rev)
	require.NoError(t, err)
	// The producer retries.
	again, err := stamped(n.bus, "s", p, `{"n":1}`)
	require.ErrorIs(t, err, producer.ErrDuplicate)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, first, pe.LastID, "the duplicate names the event that was stored")
	assert.Equal(t, uint64(0), pe.LastSeq)
	assert.Zero(t, again.ID, "no second event")
	p.Seq = 1
	ev, err := stamped(n.bus, "s", p, `{"n":2}`)
	require.NoError(t, err)
	p.Seq = 0 // an older retry still within the epoch
	_, err = stamped(n.bus, "s", p, `{"n":1}`)
	require.ErrorIs(t, err, producer.ErrDuplicate)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, ev.ID, pe.LastID, "an older retry names the last accepted event, as in memory")
	ids := storedIDs(t, n, "s")
	assert.Equal(t, []uint64{first, ev.ID}, ids, "each event once; the records are no events")
	checkStrict(t, ids)
}

// Without the record (deleted by hand here), JetStream's own
// de-duplication still refuses a repeat within the stream's Duplicates
// window: the event's Nats-Msg-Id is derived from the session, producer,
// epoch and sequence.
func TestProducerMsgIDRefusesRepeatWithoutRecord(t *testing.T) {
	opts := uniqueStream()
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	p := producer.Stamp{ID: "w", Epoch: 4}
	ev, err := stamped(n.bus, "s", p, `1`)
	require.NoError(t, err)
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), n.be.Stream())
	require.NoError(t, err)
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(">"))
	require.NoError(t, err)
	var record string
	for subj := range info.State.Subjects {
		if subj != n.be.Stream() && len(subj) > 0 && subj[len(subj)-2:] == ".w" {
			record = subj
		}
	}
	require.NotEmpty(t, record, "the producer's record subject, among %v", info.State.Subjects)
	require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject(record)))
	_, rev, err := n.be.ProducerState(context.Background(), "s", "w")
	require.NoError(t, err)
	require.Zero(t, rev, "the record is gone")
	_, err = stamped(n.bus, "s", p, `1`)
	require.ErrorIs(t, err, producer.ErrDuplicate, "JetStream recognised the event's Nats-Msg-Id")
	// The purge removed the stream's last message, which the node may
	// never have read: storedIDs' sync still finds the end.
	assert.Equal(t, []uint64{ev.ID}, storedIDs(t, n, "s"))
}

// Two producers with one id: after the newer epoch published, the older
// (a zombie after a failover) is refused with ErrStaleEpoch naming the
// epoch in force, on the node it used and on any other, and stores
// nothing.
func TestProducerStaleEpochIsFencedAcrossNodes(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	old := producer.Stamp{ID: "writer", Epoch: 1, Seq: 0}
	_, err := stamped(a.bus, "s", old, `1`)
	require.NoError(t, err)
	syncNode(t, b.bus)
	// The failover: the producer's replacement publishes through node b.
	fresh := producer.Stamp{ID: "writer", Epoch: 2, Seq: 0}
	_, err = stamped(b.bus, "s", fresh, `2`)
	require.NoError(t, err)
	old.Seq = 1
	for _, via := range []*node{a, b} {
		_, err = stamped(via.bus, "s", old, `3`)
		require.ErrorIs(t, err, producer.ErrStaleEpoch)
		var pe *producer.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, uint64(2), pe.Epoch)
		assert.Contains(t, err.Error(), `"writer"`)
		assert.ErrorIs(t, via.bus.CheckProducer("s", old), producer.ErrStaleEpoch)
	}
	assert.Len(t, storedIDs(t, a, "s"), 2)
	assert.Len(t, storedIDs(t, b, "s"), 2)
	// A new epoch must start at sequence 0.
	_, err = stamped(a.bus, "s", producer.Stamp{ID: "writer", Epoch: 3, Seq: 5}, `4`)
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	fresh.Seq = 1
	_, err = stamped(a.bus, "s", fresh, `5`)
	require.NoError(t, err, "the epoch in force goes on through either node")
}

// Each node keeps a copy of the records its publishes read and wrote, to
// save the read; the copy never decides alone. Here node a's copy is
// stale (node b moved the record): a stamp the copy accepts meets the
// record's revision check, and one it refuses is checked again on a fresh
// read, so a answers as b would.
func TestProducerNodeCopyNeverDecidesAlone(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, a.bus.CreateSession("s", ""))
	syncNode(t, b.bus)
	p := producer.Stamp{ID: "w", Epoch: 1}
	_, err := stamped(a.bus, "s", p, `0`) // a's copy: epoch 1, sequence 0
	require.NoError(t, err)
	p.Seq = 1
	viaB, err := stamped(b.bus, "s", p, `1`) // the record moves on b
	require.NoError(t, err)
	// a's copy expects 1: the record says it is a duplicate.
	_, err = stamped(a.bus, "s", p, `1`)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, producer.ErrDuplicate)
	assert.Equal(t, viaB.ID, pe.LastID)
	// a's copy is fresh again; b moves the record once more.
	p.Seq = 2
	_, err = stamped(b.bus, "s", p, `2`)
	require.NoError(t, err)
	// a's copy would call 3 a gap expecting 2; the record expects 3.
	p.Seq = 3
	_, err = stamped(a.bus, "s", p, `3`)
	require.NoError(t, err)
	// b's copy would accept 4 in epoch 1; a fences epoch 1 first.
	_, err = stamped(a.bus, "s", producer.Stamp{ID: "w", Epoch: 2}, `4`)
	require.NoError(t, err)
	p.Seq = 4
	_, err = stamped(b.bus, "s", p, `5`)
	require.ErrorIs(t, err, producer.ErrStaleEpoch)
	assert.Len(t, storedIDs(t, a, "s"), 5)
}

// A sequence past the next is refused naming the expected one, and stores
// nothing; so is a first publish of a producer that does not start at 0.
func TestProducerSequenceGapNamesExpectedOverNATS(t *testing.T) {
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, uniqueStream()...)
	p := producer.Stamp{ID: "w", Epoch: 7, Seq: 0}
	_, err := stamped(n.bus, "s", p, `0`)
	require.NoError(t, err)
	p.Seq = 2
	_, err = stamped(n.bus, "s", p, `2`)
	require.ErrorIs(t, err, producer.ErrSequenceGap)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(1), pe.Expected)
	assert.Contains(t, err.Error(), "expected 1")
	require.ErrorIs(t, n.bus.CheckProducer("s", p), producer.ErrSequenceGap)
	_, err = stamped(n.bus, "s", producer.Stamp{ID: "other", Seq: 3}, `3`)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(0), pe.Expected, "an unknown producer starts at 0")
	assert.Len(t, storedIDs(t, n, "s"), 1)
	p.Seq = 1
	require.NoError(t, n.bus.CheckProducer("s", p))
	_, err = stamped(n.bus, "s", p, `1`)
	require.NoError(t, err)
}

// Concurrent retries of one publish through two nodes store it once: the
// record's expected-sequence check lets one batch in, and the others read
// the record again and find a duplicate.
func TestProducerConcurrentRetriesStoreOnceOverNATS(t *testing.T) {
	opts := uniqueStream()
	nodes := []*node{newNode(t, shared.ClientURL(), eventbus.Options{}, opts...), newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored, dups int
	var storedID uint64
	var named []uint64 // the event each duplicate names
	var other []error
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := stamped(nodes[i%2].bus, "s", producer.Stamp{ID: "w"}, `0`)
			mu.Lock()
			defer mu.Unlock()
			var pe *producer.Error
			switch {
			case err == nil:
				stored++
				storedID = ev.ID
			case errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate):
				dups++
				named = append(named, pe.LastID)
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, other)
	assert.Equal(t, 1, stored)
	assert.Equal(t, 7, dups)
	assert.Equal(t, []uint64{storedID}, storedIDs(t, nodes[0], "s"))
	for _, id := range named {
		assert.Equal(t, storedID, id, "every duplicate names the stored event")
	}
	_, err := stamped(nodes[1].bus, "t", producer.Stamp{ID: "w"}, `0`)
	require.NoError(t, err, "another session has its own record")
}

// The records live in the stream: a node started after a restart of the
// NATS server (file storage) and of the bus node finds them, recognises a
// retry, fences a zombie and accepts the next sequence.
func TestProducerStateSurvivesRestart(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	srv, err := embedded.RunServer(embedded.ServerConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its server waits out the publish timeout
	opts := uniqueStream(rbnats.WithStorage(jetstream.FileStorage))
	before := newNode(t, srv.ClientURL(), eventbus.Options{}, opts...)
	p := producer.Stamp{ID: "w", Epoch: 3}
	ev, err := stamped(before.bus, "s", p, `0`)
	require.NoError(t, err)
	require.NoError(t, before.bus.Close())
	require.NoError(t, srv.Restart())

	after := newNode(t, srv.ClientURL(), eventbus.Options{}, opts...)
	syncNode(t, after.bus)
	_, err = stamped(after.bus, "s", p, `0`)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, producer.ErrDuplicate)
	assert.Equal(t, ev.ID, pe.LastID)
	_, err = stamped(after.bus, "s", producer.Stamp{ID: "w", Epoch: 2, Seq: 1}, `2`)
	require.ErrorIs(t, err, producer.ErrStaleEpoch)
	p.Seq = 1
	next, err := stamped(after.bus, "s", p, `1`)
	require.NoError(t, err)
	assert.Equal(t, []uint64{ev.ID, next.ID}, storedIDs(t, after, "s"))
}

// The check and the append are one step: an append against a record that
// moved since it was read (another publish of the producer, through any
// node) stores nothing and reports backend.ErrProducerConflict, after
// which the bus reads the record again.
func TestAppendProducerRefusesMovedRecord(t *testing.T) {
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, uniqueStream()...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	_, rev, err := n.be.ProducerState(context.Background(), "s", "w")
	require.NoError(t, err)
	ev, err := stamped(n.bus, "s", producer.Stamp{ID: "w"}, `0`)
	require.NoError(t, err)
	_, _, err = n.be.AppendProducer(context.Background(), []string{"s"},
		backend.Record{Type: "msg", Time: time.Now()}, producer.Stamp{ID: "w", Epoch: 1}, rev)
	require.ErrorIs(t, err, backend.ErrProducerConflict)
	st, now, err := n.be.ProducerState(context.Background(), "s", "w")
	require.NoError(t, err)
	assert.Equal(t, producer.State{Epoch: 0, LastSeq: 0, LastID: ev.ID}, st, "the record is the accepted publish's")
	assert.NotEqual(t, rev, now)
	id, rev2, err := n.be.AppendProducer(context.Background(), []string{"s"},
		backend.Record{Type: "msg", Time: time.Now()}, producer.Stamp{ID: "w", Epoch: 1}, now)
	require.NoError(t, err, "at the current revision it goes in")
	st, now, err = n.be.ProducerState(context.Background(), "s", "w")
	require.NoError(t, err)
	assert.Equal(t, producer.State{Epoch: 1, LastSeq: 0, LastID: id}, st)
	assert.Equal(t, rev2, now, "AppendProducer returns the record's new revision")
	assert.Len(t, storedIDs(t, n, "s"), 2)
}

// A stream made by an earlier version (no allow_atomic) is updated by a
// node of this one, whose stamped publishes then work; the stream's
// config says so.
func TestProducerStreamUpgraded(t *testing.T) {
	n := streamSeq.Add(1)
	name, prefix := fmt.Sprintf("U%d", n), fmt.Sprintf("u%d", n)
	opts := uniqueStream(rbnats.WithStream(name), rbnats.WithSubjectPrefix(prefix))
	nc, err := natsgo.Connect(shared.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	old, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	require.False(t, old.CachedInfo().Config.AllowAtomicPublish)
	node := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.Equal(t, name, node.be.Stream())
	st, err := js.Stream(context.Background(), name)
	require.NoError(t, err)
	assert.True(t, st.CachedInfo().Config.AllowAtomicPublish)
	_, err = stamped(node.bus, "s", producer.Stamp{ID: "w"}, `0`)
	require.NoError(t, err)
	_, err = stamped(node.bus, "s", producer.Stamp{ID: "w"}, `0`)
	require.ErrorIs(t, err, producer.ErrDuplicate)
}

// A pipeline sends without waiting, so it cannot check a stamp: over NATS
// a stamped Pipeline.Publish is refused (producer.ErrUnsupported), never
// stored unchecked; Bus.Publish takes it.
func TestProducerThroughPipelineRefusedOverNATS(t *testing.T) {
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, uniqueStream()...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	pl, err := eventbus.NewPipeline(n.bus, eventbus.PipelineOptions{})
	require.NoError(t, err)
	err = pl.Publish("s", "msg", 1, eventbus.WithProducer(producer.Stamp{ID: "w"}))
	require.ErrorIs(t, err, producer.ErrUnsupported)
	assert.True(t, errors.Is(err, errors.ErrUnsupported))
	require.NoError(t, pl.Flush(context.Background()))
	assert.Empty(t, storedIDs(t, n, "s"))
	_, err = stamped(n.bus, "s", producer.Stamp{ID: "w"}, `1`)
	require.NoError(t, err)
}

// In a 3-server cluster with a 3-replica stream (JetStream's clustered
// batch path: the records' checks are made at the stream leader), nodes on
// different servers agree: concurrent retries store once, a zombie is
// fenced, and a gap names the expected sequence.
func TestProducerInCluster(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	if testing.Short() {
		t.Skip("cluster test")
	}
	cl, err := embedded.RunCluster(3, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cl.Shutdown) // after the nodes' Close (t.Cleanup runs last in, first out): a node closed after its servers waits out the publish timeout
	opts := uniqueStream(rbnats.WithReplicas(3), rbnats.WithPublishTimeout(2*time.Second))
	a := newNode(t, cl.Servers[0].ClientURL(), eventbus.Options{}, opts...)
	b := newNode(t, cl.Servers[2].ClientURL(), eventbus.Options{}, opts...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []uint64
	var named []uint64
	var other []error
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := stamped([]*node{a, b}[i%2].bus, "s", producer.Stamp{ID: "w", Epoch: 1}, `0`)
			mu.Lock()
			defer mu.Unlock()
			var pe *producer.Error
			switch {
			case err == nil:
				stored = append(stored, ev.ID)
			case errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate):
				named = append(named, pe.LastID)
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, other)
	require.Len(t, stored, 1)
	assert.Len(t, named, 5)
	assert.Equal(t, stored, storedIDs(t, b, "s"))
	_, err = stamped(b.bus, "s", producer.Stamp{ID: "w", Epoch: 2}, `1`)
	require.NoError(t, err)
	_, err = stamped(a.bus, "s", producer.Stamp{ID: "w", Epoch: 1, Seq: 1}, `2`)
	require.ErrorIs(t, err, producer.ErrStaleEpoch)
	_, err = stamped(a.bus, "s", producer.Stamp{ID: "w", Epoch: 2, Seq: 3}, `3`)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(1), pe.Expected)
	assert.Len(t, storedIDs(t, a, "s"), 2)
}

// An idempotent producer over NATS: two nodes share one record of the
// producer, kept in the stream. A retry through the other node (its ack
// was lost) is acknowledged with the stored event's id; the producer's
// older epoch is fenced on both nodes once a newer one published.
func Example_idempotentProducer() {
	srv, err := embedded.RunServer(embedded.ServerConfig{})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	ctx := context.Background()
	opts := []rbnats.Option{rbnats.WithStream("PRODUCERS"), rbnats.WithSubjectPrefix("producers")}
	a, err := rbnats.Connect(ctx, srv.ClientURL(), eventbus.Options{}, opts...)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := rbnats.Connect(ctx, srv.ClientURL(), eventbus.Options{}, opts...)
	if err != nil {
		panic(err)
	}
	defer b.Close()

	p := producer.Stamp{ID: "agent-7", Epoch: 1, Seq: 0}
	ev, err := a.Publish("run", "chunk", "hello", eventbus.WithProducer(p))
	fmt.Println("stored:", ev.ID, err)
	_, err = b.Publish("run", "chunk", "hello", eventbus.WithProducer(p))
	var pe *producer.Error
	if errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate) {
		fmt.Println("retry via b: duplicate of", pe.LastID)
	}
	_, err = b.Publish("run", "chunk", "restarted", eventbus.WithProducer(producer.Stamp{ID: "agent-7", Epoch: 2}))
	fmt.Println("epoch 2 via b:", err)
	_, err = a.Publish("run", "chunk", "zombie", eventbus.WithProducer(producer.Stamp{ID: "agent-7", Epoch: 1, Seq: 1}))
	fmt.Println("epoch 1 via a fenced:", errors.Is(err, producer.ErrStaleEpoch))
	// Output:
	// stored: 1 <nil>
	// retry via b: duplicate of 1
	// epoch 2 via b: <nil>
	// epoch 1 via a fenced: true
}
