package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// Publishers, subscribers that come and go with every option, session
// closes, buffer clears, expiry sweeps and finally Bus.Close, all at once:
// no panic, no deadlock, no leak, and every subscriber still sees ids
// strictly increasing with history before live.
func TestConcurrentChaos(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 8, MaxSubscribers: 16, DroppableTypes: []string{"delta"}})
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	for i, n := range names[:4] {
		parent := ""
		if i > 0 {
			parent = names[(i-1)/2]
		}
		require.NoError(t, b.CreateSession(n, parent))
	}
	stop := make(chan struct{})
	var wg, pubs sync.WaitGroup
	var published, frames atomic.Int64
	for p := 0; p < 4; p++ {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for i := 0; i < 1500; i++ {
				typ := []string{"msg", "delta"}[r.IntN(2)]
				_, err := b.Publish(names[r.IntN(len(names))], typ, r.IntN(1000))
				if err == nil {
					published.Add(1)
				} else if !errors.Is(err, eventbus.ErrSessionClosed) && !errors.Is(err, eventbus.ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := eventbus.SubscribeOptions{Scope: scope.Kind(r.IntN(4)), NoReplay: r.IntN(3) == 0}
				if r.IntN(2) == 0 {
					o.Cursor = eventbus.At(uint64(r.IntN(int(b.LastEventID()) + 2)))
				}
				if r.IntN(2) == 0 {
					o.MaxQueued = 1 + r.IntN(8)
					o.Policy = []eventbus.OverflowPolicy{eventbus.DropSubscriber, eventbus.DropOldest, eventbus.DropNewest}[r.IntN(3)]
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+r.IntN(20))*time.Millisecond)
				s, err := b.Subscribe(ctx, names[r.IntN(len(names))], o)
				if err != nil {
					cancel()
					if !errors.Is(err, eventbus.ErrSessionClosed) && !errors.Is(err, eventbus.ErrClosed) &&
						!errors.Is(err, eventbus.ErrSubscriberLimit) && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					continue
				}
				var last uint64
				live := false
				useEvents := r.IntN(3) == 0
				check := func(ev eventbus.Event) bool {
					frames.Add(1)
					if ev.ID != 0 {
						if ev.ID <= last || (live && ev.Replay) {
							t.Errorf("subscriber %d: id %d (replay %v) after %d", s.ID(), ev.ID, ev.Replay, last)
							return false
						}
						last = ev.ID
						live = live || !ev.Replay
					}
					return true
				}
				if useEvents {
					for ev := range s.Events() {
						if !check(ev) {
							break
						}
					}
				} else {
					for {
						ev, err := s.Next(ctx)
						if err != nil || !check(ev) {
							break
						}
					}
				}
				if r.IntN(2) == 0 {
					s.Close()
				}
				cancel()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(3, 3))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			n := names[4+r.IntN(4)]
			switch r.IntN(4) {
			case 0:
				_ = b.CloseSession(n)
			case 1:
				_ = b.ClearReplayBuffer(n)
			case 2:
				b.ExpireIdle()
			case 3:
				_ = b.CreateSession(fmt.Sprintf("%s.%d", n, i), n)
			}
		}
	}()
	pubs.Wait()
	require.NoError(t, b.Close())
	close(stop)
	wg.Wait()
	st := b.Stats()
	assert.Zero(t, st.Guarded)
	assert.Zero(t, st.Subscribers)
	t.Logf("published %d, frames read %d, stats %+v", published.Load(), frames.Load(), st)
}

// WithLogger gets one record per warning and eviction, naming the session,
// the subscriber and the trigger event.
func TestWithLogger(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	var mu sync.Mutex
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil)
	b := newBus(t, eventbus.Options{OverflowPolicy: eventbus.DropSubscriber, Logger: slog.New(h)})
	subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 1, Name: "alice"})
	publish(t, b, "s", 2)
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	assert.Contains(t, out, `msg="eventbus: slow_client_warning" session=s subscriber=1 name=alice event_id=1 event_type=msg`)
	assert.Contains(t, out, `msg="eventbus: client_evicted" session=s subscriber=1 name=alice event_id=2 event_type=msg`)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
