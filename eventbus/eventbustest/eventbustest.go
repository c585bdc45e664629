package eventbustest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// Option adjusts [Run].
type Option func(*suite)

// WithSync gives [Run] a function that returns once b has ingested every
// event published so far on any node (and failing t if it cannot). The
// in-memory bus needs none; a bus over adapters/nats does.
func WithSync(fn func(t *testing.T, b *eventbus.Bus)) Option {
	return func(s *suite) { s.sync = fn }
}

// WithTimeout sets how long the suite waits for one frame (default 10 s).
func WithTimeout(d time.Duration) Option { return func(s *suite) { s.wait = d } }

type suite struct {
	newBus func(t *testing.T, cfg eventbus.Options) *eventbus.Bus
	sync   func(t *testing.T, b *eventbus.Bus)
	wait   time.Duration
}

// Run runs the whole delivery table against buses made by newBus, each
// case in its own subtest with its own bus. newBus returns a fresh bus
// configured by cfg, with no sessions and no events, and registers its own
// cleanup with t.Cleanup; each call gives an independent bus (over a
// backend: a new stream, so that no test sees another's ids or sessions).
func Run(t *testing.T, newBus func(t *testing.T, cfg eventbus.Options) *eventbus.Bus, opts ...Option) {
	s := &suite{newBus: newBus, wait: 10 * time.Second}
	for _, o := range opts {
		o(s)
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// syncBus waits until b has ingested everything published so far.
func (s *suite) syncBus(t *testing.T, b *eventbus.Bus) {
	t.Helper()
	if s.sync != nil {
		s.sync(t, b)
	}
}

// publish publishes n events of type typ to session and returns their ids.
func publish(t *testing.T, b *eventbus.Bus, session, typ string, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for i := 0; i < n; i++ {
		ev, err := b.Publish(session, typ, map[string]any{"session": session, "n": i})
		require.NoError(t, err)
		require.NotZero(t, ev.ID)
		ids = append(ids, ev.ID)
	}
	return ids
}

func subscribe(t *testing.T, b *eventbus.Bus, session string, o eventbus.SubscribeOptions) *eventbus.Subscription {
	t.Helper()
	sub, err := b.Subscribe(context.Background(), session, o)
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	return sub
}

// next reads one frame within the suite's timeout.
func (s *suite) next(t *testing.T, sub *eventbus.Subscription) eventbus.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.wait)
	defer cancel()
	ev, err := sub.Next(ctx)
	require.NoError(t, err, "waiting for a frame")
	return ev
}

// ids reads real events until it has n of them, failing on a synthetic
// frame, and returns their ids.
func (s *suite) ids(t *testing.T, sub *eventbus.Subscription, n int, replay bool) []uint64 {
	t.Helper()
	out := make([]uint64, 0, n)
	for len(out) < n {
		ev := s.next(t, sub)
		require.False(t, ev.ID == 0, "unexpected frame %s %s after %v", ev.Type, ev.Data, out)
		assert.Equal(t, replay, ev.Replay, "Replay flag of id %d", ev.ID)
		out = append(out, ev.ID)
	}
	return out
}

// frame reads one synthetic frame of type typ and decodes its data into v.
func (s *suite) frame(t *testing.T, sub *eventbus.Subscription, typ string, v any) {
	t.Helper()
	ev := s.next(t, sub)
	require.Equal(t, typ, ev.Type, "frame %s (id %d, data %s)", ev.Type, ev.ID, ev.Data)
	require.Zero(t, ev.ID, "synthetic frames have no id")
	if v != nil {
		require.NoError(t, json.Unmarshal(ev.Data, v))
	}
}

// ended reads the end of sub: Next returns an error matching want.
func (s *suite) ended(t *testing.T, sub *eventbus.Subscription, want error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.wait)
	defer cancel()
	ev, err := sub.Next(ctx)
	require.ErrorIs(t, err, want, "got frame %s %d instead", ev.Type, ev.ID)
}

// quiet checks that nothing more is queued for sub right now.
func quiet(t *testing.T, sub *eventbus.Subscription) {
	t.Helper()
	ev, ok := sub.TryNext()
	assert.False(t, ok, "unexpected frame %s id %d", ev.Type, ev.ID)
}

// increasing checks ids rise strictly.
func increasing(t *testing.T, ids []uint64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ids not strictly increasing at %d: %d then %d", i, ids[i-1], ids[i])
		}
	}
}
