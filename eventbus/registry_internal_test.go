package eventbus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/observe"
)

// Lookups read the session registry, not the bus: while the bus lock is
// held (as a publish, or a large resume, holds it), SessionExists,
// Sessions and the registry's subscriber counts still answer, with the right figures.
func TestLookupsDoNotWaitForTheBusLock(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Publish("a", "t", nil)
	require.NoError(t, err)
	require.NoError(t, b.CreateSession("c", "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := b.Subscribe(ctx, "a", SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	defer sub.Close()

	b.hist.Lock() // a publish in progress
	type answer struct {
		exists, gone bool
		sessions     []observe.SessionInfo
		counts       map[string]int
	}
	got := make(chan answer, 1)
	go func() {
		got <- answer{exists: b.SessionExists("c"), gone: b.SessionExists("nope"),
			sessions: b.Sessions(), counts: b.hist.SubscriberCounts()}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(10 * time.Second):
		b.hist.Unlock()
		t.Fatal("a lookup waited for the bus lock")
	}
	b.hist.Unlock()

	assert.True(t, a.exists)
	assert.False(t, a.gone)
	assert.Equal(t, map[string]int{"a": 1}, a.counts)
	assert.ElementsMatch(t, []observe.SessionInfo{
		{ID: "a", Subscribers: 1, Buffered: 1, LastEventID: 1},
		{ID: "c", Parent: "a"},
	}, a.sessions)
}

// The registry holds exactly the tree's sessions through creates, parent
// changes, closes and expiry, with listings running concurrently (-race).
func TestRegistryFollowsTheTree(t *testing.T) {
	clock := time.Unix(1000, 0)
	var cmu sync.Mutex
	now := func() time.Time { cmu.Lock(); defer cmu.Unlock(); return clock }
	b, err := New(Options{SessionTTL: time.Hour, now: now})
	require.NoError(t, err)
	defer b.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, s := range b.Sessions() {
				if s.Parent != "" {
					assert.NotEqual(t, s.ID, s.Parent)
				}
			}
			b.hist.SubscriberCounts()
			b.SessionExists("p0")
		}
	}()
	for i := range 50 {
		p, c := fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i)
		_, err := b.Publish(p, "t", nil)
		require.NoError(t, err)
		require.NoError(t, b.CreateSession(c, ""))
		require.NoError(t, b.CreateSession(c, p)) // a root gets its parent late
		if i%3 == 0 {
			require.NoError(t, b.CloseSession(p)) // c becomes a root
		}
	}
	cmu.Lock()
	clock = clock.Add(2 * time.Hour)
	cmu.Unlock()
	expired := b.ExpireIdle()
	close(stop)
	wg.Wait()

	b.hist.Lock()
	want := map[string]string{}
	b.hist.Each(func(x *session) {
		parent := ""
		if p := x.Parent(); p != nil {
			parent = p.ID
		}
		want[x.ID] = parent
	})
	b.hist.Unlock()
	got := map[string]string{}
	for _, s := range b.Sessions() {
		got[s.ID] = s.Parent
	}
	assert.Equal(t, want, got, "the registry lists exactly the tree's sessions")
	assert.Positive(t, expired)
}
