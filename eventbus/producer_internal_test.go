package eventbus

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/producer"
)

const maxProducers = store.MaxProducers

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
	x, ok := b.hist.Lookup("s")
	require.True(t, ok)
	require.Equal(t, maxProducers, x.Producers(), "the session's records are bounded")
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
	f := newFedStore(b.st.(*memStore), nil, nil) // its copies; no backend asked
	for i := range maxProducers + 50 {
		f.keepProducer("s", fmt.Sprint("p", i), store.ProducerRecord{Rev: uint64(i + 1)})
	}
	b.hist.Lock()
	n := b.hist.Get("s").Producers()
	b.hist.Unlock()
	require.Equal(t, maxProducers, n)
	_, ok := f.producerCopy("s", "p0")
	require.False(t, ok, "the least recently used copy is forgotten")
	rec, ok := f.producerCopy("s", fmt.Sprint("p", maxProducers+49))
	require.True(t, ok)
	require.Equal(t, uint64(maxProducers+50), rec.Rev)
}
