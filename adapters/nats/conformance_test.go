package nats_test

import (
	"testing"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/eventbustest"
)

// TestConformance runs the eventbus conformance suite on a NATS bus node
// (a fresh stream per case on the shared embedded server).
func TestConformance(t *testing.T) {
	eventbustest.Run(t, func(t *testing.T, cfg eventbus.Options) *eventbus.Bus {
		return newNode(t, shared.ClientURL(), cfg, uniqueStream()...).bus
	}, eventbustest.WithSync(func(t *testing.T, b *eventbus.Bus) { syncNode(t, b) }))
}
