package eventbus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/scope"
)

// Issue 11 §3: publishers of distinct session trees do not serialize. The
// test hook holds each publish inside its tree-locked section (structure
// lock's read side and tree lock held, before the id is taken) until both
// publishers are inside at once — which a bus-wide lock around that section
// would make impossible: the second publisher would never arrive and the
// test would fail at its deadline (a deadlock guard, not a timing
// assertion). Then both go on, and every subscriber — tree-scoped ones and,
// in the second case, an "all" subscriber, for which the publishers meet in
// the ordering step — gets exactly its events in id order.
func TestPublishersOfDistinctTreesRunInParallel(t *testing.T) {
	for _, withAll := range []bool{false, true} {
		name := "tree subscribers only"
		if withAll {
			name = "with an all subscriber"
		}
		t.Run(name, func(t *testing.T) {
			b, err := New(Options{})
			require.NoError(t, err)
			defer b.Close()
			for _, s := range [][2]string{{"a", ""}, {"a.1", "a"}, {"b", ""}, {"b.1", "b"}} {
				require.NoError(t, b.CreateSession(s[0], s[1]))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			subA, err := b.Subscribe(ctx, "a", SubscribeOptions{Scope: scope.Descendants})
			require.NoError(t, err)
			subB, err := b.Subscribe(ctx, "b.1", SubscribeOptions{Scope: scope.Subtree})
			require.NoError(t, err)
			var subAll *Subscription
			if withAll {
				subAll, err = b.Subscribe(ctx, "a", SubscribeOptions{Scope: scope.All})
				require.NoError(t, err)
			}

			arrived, release := make(chan string, 2), make(chan struct{})
			testHookTreeLocked = func(id string) {
				arrived <- id
				<-release
			}
			defer func() { testHookTreeLocked = nil }()
			var wg sync.WaitGroup
			ids := make(map[string]uint64)
			var mu sync.Mutex
			for _, s := range []string{"a.1", "b.1"} {
				wg.Go(func() {
					ev, err := b.Publish(s, "t", nil)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					ids[s] = ev.ID
					mu.Unlock()
				})
			}
			inside := map[string]bool{}
			deadline := time.After(20 * time.Second)
			for len(inside) < 2 {
				select {
				case id := <-arrived:
					inside[id] = true
				case <-deadline:
					close(release)
					wg.Wait()
					t.Fatalf("only %v got inside its tree-locked section: the trees' publishes serialize", inside)
				}
			}
			// Both publishers are inside their critical sections now.
			close(release)
			wg.Wait()
			testHookTreeLocked = nil

			next := func(s *Subscription) uint64 {
				ev, err := s.Next(ctx)
				require.NoError(t, err)
				return ev.ID
			}
			require.Equal(t, ids["a.1"], next(subA))
			require.Equal(t, ids["b.1"], next(subB))
			if withAll {
				lo, hi := min(ids["a.1"], ids["b.1"]), max(ids["a.1"], ids["b.1"])
				require.Equal(t, lo, next(subAll))
				require.Equal(t, hi, next(subAll))
			}
			for _, s := range []*Subscription{subA, subB, subAll} {
				if s == nil {
					continue
				}
				_, ok := s.TryNext()
				require.False(t, ok, "an extra frame")
			}
		})
	}
}
