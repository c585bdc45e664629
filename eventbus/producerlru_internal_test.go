package eventbus

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/producer"
)

// producerLRU keeps at most maxProducers, forgetting the least recently
// used: a get or a put makes a producer the most recently used.
func TestProducerLRUForgetsLeastRecentlyUsed(t *testing.T) {
	require.Equal(t, 1024, maxProducers, "the documented bound (docs/durable-streams.md, docs/guarantees.md)")
	var c *producerLRU[int]
	_, ok := c.get("a")
	require.False(t, ok, "a nil table knows nobody")
	require.Zero(t, c.len())
	c = new(producerLRU[int])
	for i := range maxProducers {
		c.put(fmt.Sprint(i), i)
	}
	require.Equal(t, maxProducers, c.len())
	v, ok := c.get("0") // 0 is now the most recently used; 1 the least
	require.True(t, ok)
	require.Equal(t, 0, v)
	c.put("2", 20) // an update is no new producer
	require.Equal(t, maxProducers, c.len())
	c.put("new", -1)
	require.Equal(t, maxProducers, c.len(), "the table never grows past maxProducers")
	_, ok = c.get("1")
	require.False(t, ok, "the least recently used producer is forgotten")
	for _, id := range []string{"0", "2", "3", "new"} {
		_, ok = c.get(id)
		require.True(t, ok, id)
	}
	v, _ = c.get("2")
	require.Equal(t, 20, v)
	for i := range 10 * maxProducers {
		c.put(fmt.Sprint("churn-", i), i)
	}
	require.Equal(t, maxProducers, c.len())
	require.Len(t, c.byID, c.order.Len())
}

// A client cycling producer ids on a long session keeps the session's
// records at maxProducers. A producer forgotten past them is unknown
// again, as one that never published: its retry of an accepted sequence
// above 0 and any later sequence are refused with ErrSequenceGap
// (expected 0) and stored nowhere; it goes on from sequence 0 (a new
// epoch, as a restarted Durable Streams producer does). A producer that
// keeps publishing is never forgotten.
func TestForgottenProducerIsRefusedAsGap(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	publish := func(p producer.Stamp) (Event, error) {
		return b.PublishJSON("s", "msg", []byte(`1`), WithProducer(p))
	}
	old := producer.Stamp{ID: "old", Epoch: 4}
	for old.Seq = 0; old.Seq < 3; old.Seq++ {
		_, err = publish(old)
		require.NoError(t, err)
	}
	busy := producer.Stamp{ID: "busy"}
	for i := range maxProducers + 100 {
		_, err = publish(producer.Stamp{ID: fmt.Sprint("cycled-", i)})
		require.NoError(t, err)
		if i%100 == 0 { // busy publishes every 100 new producers
			_, err = publish(busy)
			require.NoError(t, err)
			busy.Seq++
		}
	}
	x, ok := b.mem.sessions.Load("s")
	require.True(t, ok)
	require.Equal(t, maxProducers, x.producers.len(), "the session's records are bounded")
	published := b.Stats().Published

	for _, seq := range []uint64{2, 3, 9} { // a retry of the last accepted, the next, a later one
		_, err = publish(producer.Stamp{ID: "old", Epoch: 4, Seq: seq})
		require.ErrorIs(t, err, producer.ErrSequenceGap, "seq %d", seq)
		var pe *producer.Error
		require.ErrorAs(t, err, &pe)
		assert.Zero(t, pe.Expected, "a forgotten producer is expected at 0, as an unknown one")
	}
	require.Equal(t, published, b.Stats().Published, "nothing stored twice, nothing stored out of sequence")
	require.NoError(t, b.CheckProducer("s", producer.Stamp{ID: "old", Epoch: 5}))
	_, err = publish(producer.Stamp{ID: "old", Epoch: 5})
	require.NoError(t, err, "it goes on from sequence 0")

	busy.Seq--
	_, err = publish(busy)
	require.ErrorIs(t, err, producer.ErrDuplicate, "a producer in use is remembered: its retry is still a duplicate")
	// The memory bus's rule for a producer it never knew, the same.
	_, err = publish(producer.Stamp{ID: "never-seen", Seq: 1})
	require.ErrorIs(t, err, producer.ErrSequenceGap)
}

// Over a backend, a node's copies of the backend's producer records are
// bounded the same way (forgetting one costs only a read of the backend's
// record, the authority).
func TestRemoteProducerCopiesBounded(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, b.CreateSession("s", ""))
	for i := range maxProducers + 50 {
		b.keepRemoteProducer("s", fmt.Sprint("p", i), remoteProducer{rev: uint64(i + 1)})
	}
	b.mu.Lock()
	n := b.mem.tree.Get("s").Value.remoteProducers.len()
	b.mu.Unlock()
	require.Equal(t, maxProducers, n)
	_, ok := b.remoteProducerCopy("s", "p0")
	require.False(t, ok, "the least recently used copy is forgotten")
	rec, ok := b.remoteProducerCopy("s", fmt.Sprint("p", maxProducers+49))
	require.True(t, ok)
	require.Equal(t, uint64(maxProducers+50), rec.rev)
}
