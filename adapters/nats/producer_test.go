package nats_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers are the in-process bus's for now: over NATS a
// publish WithProducer (and CheckProducer) is refused with
// producer.ErrUnsupported (errors.ErrUnsupported), and nothing is stored —
// never accepted unchecked. JetStream's message de-duplication
// (Nats-Msg-Id) and expected-sequence checks are the planned mechanism
// (docs/durable-streams.md).
func TestProducerRefusedOverNATS(t *testing.T) {
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, uniqueStream()...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	_, err := n.bus.PublishJSON("s", "msg", []byte(`1`), eventbus.WithProducer(producer.Stamp{ID: "w"}))
	require.ErrorIs(t, err, producer.ErrUnsupported)
	assert.True(t, errors.Is(err, errors.ErrUnsupported))
	require.ErrorIs(t, n.bus.CheckProducer("s", producer.Stamp{ID: "w"}), errors.ErrUnsupported)
	ev, err := n.bus.PublishJSON("s", "msg", []byte(`2`))
	require.NoError(t, err)
	assert.Positive(t, ev.ID, "the bus itself goes on")
}
