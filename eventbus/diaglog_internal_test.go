package eventbus

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockProbe is a slog.Handler that records whether the bus lock was free
// each time it was asked to write.
type lockProbe struct {
	b             *Bus
	calls, locked atomic.Int32
}

func (p *lockProbe) Enabled(context.Context, slog.Level) bool { return true }
func (p *lockProbe) Handle(context.Context, slog.Record) error {
	p.calls.Add(1)
	if p.b.hist.TryLock() {
		p.b.hist.Unlock()
	} else {
		p.locked.Add(1)
	}
	return nil
}
func (p *lockProbe) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *lockProbe) WithGroup(string) slog.Handler      { return p }

// Issue 12.9: diagnostics were logged (and the hook called) under the bus
// lock, so a slow log sink stalled every publisher. Both now run after the
// lock is released.
func TestDiagnosticsOutsideBusLock(t *testing.T) {
	t.Parallel()
	probe := &lockProbe{}
	detail := &lockProbe{}
	b, err := New(Options{DroppableTypes: []string{"delta"}, Logger: slog.New(probe), Diagnostics: slog.New(detail)})
	require.NoError(t, err)
	defer b.Close()
	probe.b, detail.b = b, b
	sub, err := b.Subscribe(context.Background(), "s", SubscribeOptions{MaxQueued: 16, NoReplay: true})
	require.NoError(t, err)
	defer sub.Close()
	for range 40 {
		_, err := b.Publish("s", "delta", nil)
		require.NoError(t, err)
	}
	for range 40 {
		_, err := b.Publish("s", "msg", nil)
		require.NoError(t, err)
	}
	require.Positive(t, probe.calls.Load())
	require.Greater(t, detail.calls.Load(), probe.calls.Load(), "every incident has its own record")
	assert.Zero(t, probe.locked.Load(), "logged under the bus lock")
	assert.Zero(t, detail.locked.Load(), "diagnostics written under the bus lock")
}
