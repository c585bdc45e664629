package eventbus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := eventbus.New(eventbus.Options{MaxQueueSize: -5})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MaxQueueSize")
	_, err = eventbus.New(eventbus.Options{Epoch: "bad epoch"})
	require.ErrorIs(t, err, eventbus.ErrInvalid)

	b := newBus(t, eventbus.Options{Epoch: "e1"})
	assert.Equal(t, "e1", b.Epoch())
	b1, b2 := newBus(t, eventbus.Options{}), newBus(t, eventbus.Options{})
	assert.Len(t, b1.Epoch(), 16)
	assert.NotEqual(t, b1.Epoch(), b2.Epoch())
	assert.Equal(t, eventbus.Options{}.WithDefaults().ReplayBufferSize, b1.Options().ReplayBufferSize)
}
