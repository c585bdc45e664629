package eventbustest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/eventbustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemory runs the conformance suite on the in-memory bus.
func TestMemory(t *testing.T) {
	eventbustest.Run(t, func(t *testing.T, cfg eventbus.Options) *eventbus.Bus {
		b, err := eventbus.New(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}
