package eventbus_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/internal/testkit"
)

// replayIDs returns the ids session's replay buffer holds.
var replayIDs = testkit.ReplayIDs

// A retried publish after a lost ack (same producer, epoch, sequence) is
// acknowledged with ErrDuplicate naming the stored event, and stored once.
func TestProducerRetryAfterLostAckIsStoredOnce(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	p := producer.Stamp{ID: "writer-1", Epoch: 0, Seq: 0}
	ev, err := b.PublishJSON("s", "msg", []byte(`{"n":1}`), eventbus.WithProducer(p))
	require.NoError(t, err)
	// The ack was lost: the producer sends the same publish again.
	again, err := b.PublishJSON("s", "msg", []byte(`{"n":1}`), eventbus.WithProducer(p))
	require.ErrorIs(t, err, producer.ErrDuplicate)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, ev.ID, pe.LastID, "the duplicate names the event that was stored")
	assert.Equal(t, uint64(0), pe.LastSeq)
	assert.Zero(t, again.ID, "no second event")
	p.Seq = 1
	_, err = b.PublishJSON("s", "msg", []byte(`{"n":2}`), eventbus.WithProducer(p))
	require.NoError(t, err)
	p.Seq = 0 // an older retry still within the epoch
	_, err = b.PublishJSON("s", "msg", []byte(`{"n":1}`), eventbus.WithProducer(p))
	require.ErrorIs(t, err, producer.ErrDuplicate)
	assert.Equal(t, []uint64{ev.ID, ev.ID + 1}, replayIDs(t, b, "s"))
}

// Two producers with one id: after the newer epoch published, the older
// (a zombie after a failover) is refused with ErrStaleEpoch naming the
// epoch in force, and stores nothing.
func TestProducerStaleEpochIsFenced(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	old := producer.Stamp{ID: "writer", Epoch: 1, Seq: 0}
	_, err := b.PublishJSON("s", "msg", []byte(`1`), eventbus.WithProducer(old))
	require.NoError(t, err)
	fresh := producer.Stamp{ID: "writer", Epoch: 2, Seq: 0}
	_, err = b.PublishJSON("s", "msg", []byte(`2`), eventbus.WithProducer(fresh))
	require.NoError(t, err)
	old.Seq = 1
	_, err = b.PublishJSON("s", "msg", []byte(`3`), eventbus.WithProducer(old))
	require.ErrorIs(t, err, producer.ErrStaleEpoch)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(2), pe.Epoch)
	assert.Contains(t, err.Error(), `"writer"`)
	assert.Len(t, replayIDs(t, b, "s"), 2)
	// A new epoch must start at sequence 0.
	_, err = b.PublishJSON("s", "msg", []byte(`4`), eventbus.WithProducer(producer.Stamp{ID: "writer", Epoch: 3, Seq: 5}))
	require.ErrorIs(t, err, eventbus.ErrInvalid)
}

// A sequence gap is refused with ErrSequenceGap naming the expected
// sequence; the expected one is then accepted.
func TestProducerSequenceGapNamesExpected(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	p := producer.Stamp{ID: "w", Epoch: 0, Seq: 0}
	_, err := b.PublishJSON("s", "msg", []byte(`0`), eventbus.WithProducer(p))
	require.NoError(t, err)
	p.Seq = 3
	_, err = b.PublishJSON("s", "msg", []byte(`3`), eventbus.WithProducer(p))
	require.ErrorIs(t, err, producer.ErrSequenceGap)
	var pe *producer.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(1), pe.Expected)
	assert.Contains(t, err.Error(), "expected 1")
	p.Seq = 1
	_, err = b.PublishJSON("s", "msg", []byte(`1`), eventbus.WithProducer(p))
	require.NoError(t, err)
	assert.Len(t, replayIDs(t, b, "s"), 2)
	// A producer unknown to the session starts at 0.
	_, err = b.PublishJSON("s", "msg", []byte(`"x"`), eventbus.WithProducer(producer.Stamp{ID: "new", Seq: 2}))
	require.ErrorIs(t, err, producer.ErrSequenceGap)
}

// Producers are per session, independent of each other, and concurrent
// retries of one sequence store it once.
func TestProducerConcurrentRetriesStoreOnce(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	var wg sync.WaitGroup
	var stored, dups int
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.PublishJSON("s", "msg", []byte(`0`), eventbus.WithProducer(producer.Stamp{ID: "w"}))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case errors.Is(err, producer.ErrDuplicate):
				dups++
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, stored)
	assert.Equal(t, 7, dups)
	_, err := b.PublishJSON("t", "msg", []byte(`0`), eventbus.WithProducer(producer.Stamp{ID: "w"}))
	require.NoError(t, err, "another session has its own record")
}

// CheckProducer answers as a publish would, and records nothing.
func TestCheckProducer(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	p := producer.Stamp{ID: "w"}
	require.NoError(t, b.CreateSession("s", ""))
	require.NoError(t, b.CheckProducer("s", p))
	require.NoError(t, b.CheckProducer("s", p), "nothing recorded")
	_, err := b.PublishJSON("s", "msg", []byte(`0`), eventbus.WithProducer(p))
	require.NoError(t, err)
	require.ErrorIs(t, b.CheckProducer("s", p), producer.ErrDuplicate)
	require.ErrorIs(t, b.CheckProducer("nope", p), eventbus.ErrSessionNotFound)
}

// An idempotent producer: the retry of a publish whose ack was lost is
// acknowledged with ErrDuplicate and stored once; after the producer
// restarted with a higher epoch, its zombie is fenced; a skipped sequence
// is refused naming the one expected.
func ExampleWithProducer() {
	b, _ := eventbus.New(eventbus.Options{})
	defer b.Close()
	pub := func(epoch, seq uint64, text string) {
		ev, err := b.Publish("chat", "msg", text, eventbus.WithProducer(producer.Stamp{ID: "writer", Epoch: epoch, Seq: seq}))
		var pe *producer.Error
		switch {
		case errors.As(err, &pe) && errors.Is(err, producer.ErrDuplicate):
			fmt.Printf("%s: duplicate of event %d\n", text, pe.LastID)
		case err != nil:
			fmt.Printf("%s: %v\n", text, err)
		default:
			fmt.Printf("%s: stored as event %d\n", text, ev.ID)
		}
	}
	pub(0, 0, "hello")
	pub(0, 0, "hello") // the retry after a lost ack
	pub(1, 0, "again") // the producer restarted: epoch 1
	pub(0, 1, "zombie")
	pub(1, 5, "skipped")
	// Output:
	// hello: stored as event 1
	// hello: duplicate of event 1
	// again: stored as event 2
	// zombie: eventbus: stale producer epoch: producer "writer" of session "chat" sent epoch 0, epoch 1 is in force
	// skipped: eventbus: producer sequence gap: producer "writer" of session "chat" sent sequence 5, expected 1
}

// Over a backend that keeps no producer records (no
// ProducerBackend) a stamped publish and CheckProducer are refused
// with producer.ErrUnsupported (errors.ErrUnsupported): never accepted
// unchecked. The bus goes on.
func TestProducerUnsupportedOverPlainBackend(t *testing.T) {
	b, fb := newFedBus(t)
	fb.ingest(1, "msg", "s")
	_, err := b.PublishJSON("s", "msg", []byte(`1`), eventbus.WithProducer(producer.Stamp{ID: "w"}))
	require.ErrorIs(t, err, producer.ErrUnsupported)
	assert.True(t, errors.Is(err, errors.ErrUnsupported))
	require.ErrorIs(t, b.CheckProducer("s", producer.Stamp{ID: "w"}), errors.ErrUnsupported)
	_, err = b.PublishJSON("s", "msg", []byte(`1`), eventbus.WithProducer(producer.Stamp{ID: ""}))
	require.ErrorIs(t, err, eventbus.ErrInvalid, "a bad producer id is named before anything else")
	assert.True(t, b.SessionExists("s"))
}
