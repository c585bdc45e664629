package eventbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/replaybus/replaybus/eventbus/backend"
)

// The backend seam: where ids, history and cross-node fan-out live when a
// bus spans several nodes (adapters/nats implements it over NATS
// JetStream). Its contract is package eventbus/backend, one level below,
// as database/sql/driver is below database/sql: only a backend's author
// imports it. The in-memory bus ([New]) needs none of it.

// ErrBackend wraps a backend failure: the reason a subscription of a bus
// made with [NewWithBackend] ends when its backend fails (wrapping the
// backend's own error), and what Subscribe returns when the backend cannot
// say how far behind this node is. The in-memory bus never returns it.
var ErrBackend = errors.New("eventbus: backend failure")

// NewWithBackend returns a bus whose ids, history and cross-node fan-out
// come from be, configured by cfg as [New] does (cfg.Epoch is ignored: the
// epoch is be.Epoch()). It starts be with the bus's backend.Feed; ctx bounds
// the start only. [Bus.Close] also closes be. Errors: cfg's, as New, and
// be.Start's, wrapped.
func NewWithBackend(ctx context.Context, cfg Options, be backend.Backend) (*Bus, error) {
	b, feed, err := newBus(cfg, be)
	if err != nil {
		return nil, err
	}
	if err := be.Start(ctx, feed); err != nil {
		b.Close()
		return nil, fmt.Errorf("eventbus: starting backend: %w", err)
	}
	return b, nil
}
