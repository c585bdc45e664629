package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// TestReviewParallelTreesUnderChurn: publishers on several session trees run
// while another goroutine moves sessions between trees the whole time —
// late attachment of a root that published (two trees merge), closing a
// session with children (they move up; closing a root splits its tree),
// reopening closed ids under another parent — and while "all" subscribers
// come and go. What must hold whatever the interleaving:
//
//   - an "all" subscriber made without replay reads every id above the
//     one current when it subscribed, each once, with no gap (ids are
//     contiguous: a refused publish takes none, and every accepted one is
//     offered to "all" in id order);
//   - every tree-scoped subscriber reads strictly increasing ids;
//   - a publisher that found its session open appended it to that
//     session's tree: nothing is published to a session that the reader of
//     its own scope never hears of;
//   - afterwards Stats agree with what happened: Published is the last id,
//     Subscribers is 0 once every subscription is closed, Guarded is 0.
//
// No timing decides anything: the goroutines run a fixed number of steps.
func TestReviewParallelTreesUnderChurn(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	bus := newBus(t, eventbus.Options{ReplayBufferSize: 100_000, MaxSubscribers: 10_000, MaxRetained: 10_000,
		ReplayBudgetBytes: 1 << 30})
	big := eventbus.SubscribeOptions{MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30, NoReplay: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// anchor never closes: the "all" subscribers are made on it.
	require.NoError(t, bus.CreateSession("anchor", ""))
	const trees = 4
	for r := range trees {
		root := fmt.Sprintf("r%d", r)
		require.NoError(t, bus.CreateSession(root, ""))
		for c := range 3 {
			require.NoError(t, bus.CreateSession(fmt.Sprintf("%s.c%d", root, c), root))
		}
	}

	// Live-only "all" readers, each checking contiguity.
	type allReader struct {
		sub *eventbus.Subscription
		got []uint64
	}
	var readersMu sync.Mutex
	var readers []*allReader
	newAll := func() *allReader {
		o := big
		o.Scope = scope.All
		s, err := bus.Subscribe(ctx, "anchor", o)
		require.NoError(t, err)
		return &allReader{sub: s}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}

	// Publishers: each on its own tree's sessions, and on the attached
	// roots the churner makes; a closed session is refused, never lost.
	for p := range trees {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds * 4 {
				sess := fmt.Sprintf("r%d.c%d", p, i%3)
				switch i % 5 {
				case 0:
					sess = fmt.Sprintf("r%d", p)
				case 1:
					sess = fmt.Sprintf("late%d.%d", p, i%7)
				}
				_, err := bus.Publish(sess, "t", nil)
				if err != nil && !errors.Is(err, eventbus.ErrSessionClosed) {
					fail(fmt.Errorf("publish %s: %w", sess, err))
					return
				}
			}
		}()
	}

	// The churner: merges, splits, closes and reopens.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rounds {
			p := i % trees
			root := fmt.Sprintf("r%d", p)
			late := fmt.Sprintf("late%d.%d", p, i%7)
			// A root that may have published is attached late under
			// another tree (merge), if it is still a root.
			if err := bus.CreateSession(late, fmt.Sprintf("r%d.c%d", (p+1)%trees, i%3)); err != nil &&
				!errors.Is(err, eventbus.ErrInvalid) && !errors.Is(err, eventbus.ErrSessionClosed) {
				fail(fmt.Errorf("attach %s: %w", late, err))
				return
			}
			// Close a child (its children move up) and reopen it.
			child := fmt.Sprintf("%s.c%d", root, i%3)
			if err := bus.CloseSession(child); err != nil {
				fail(err)
				return
			}
			if err := bus.CreateSession(child, root); err != nil && !errors.Is(err, eventbus.ErrSessionClosed) {
				fail(fmt.Errorf("reopen %s: %w", child, err))
				return
			}
			// Close the late root (split: its tree's parts become roots)
			// every third round, and a whole root every seventh.
			if i%3 == 0 {
				_ = bus.CloseSession(late)
				_ = bus.CreateSession(late, "")
			}
			if i%7 == 0 {
				if err := bus.CloseSession(root); err != nil {
					fail(err)
					return
				}
				if err := bus.CreateSession(root, ""); err != nil {
					fail(fmt.Errorf("reopen %s: %w", root, err))
					return
				}
				for c := range 3 {
					// the children became roots: put them back (attach late)
					_ = bus.CreateSession(fmt.Sprintf("%s.c%d", root, c), root)
				}
			}
			// An "all" subscriber appears mid-stream; one goes away.
			r := newAll()
			readersMu.Lock()
			readers = append(readers, r)
			if len(readers) > 3 {
				old := readers[0]
				readers = readers[1:]
				readersMu.Unlock()
				old.sub.Close()
			} else {
				readersMu.Unlock()
			}
		}
	}()

	var rwg sync.WaitGroup
	// Tree-scoped readers on sessions that are closed and reopened: they
	// end with ErrSessionClosed; until then ids rise.
	for k, kind := range []scope.Kind{scope.Session, scope.Descendants, scope.Subtree} {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := big
				o.Scope = kind
				on := fmt.Sprintf("r%d", k%trees)
				if kind == scope.Subtree {
					on = fmt.Sprintf("r%d.c%d", k%trees, i%3)
				}
				s, err := bus.Subscribe(ctx, on, o)
				if err != nil {
					if errors.Is(err, eventbus.ErrSessionClosed) || errors.Is(err, eventbus.ErrSessionNotFound) {
						continue
					}
					fail(err)
					return
				}
				var last uint64
				for range 50 {
					ev, ok := s.TryNext()
					if !ok {
						break
					}
					if ev.ID != 0 {
						if ev.ID <= last {
							fail(fmt.Errorf("%v on %s: id %d after %d", kind, on, ev.ID, last))
						}
						last = ev.ID
					}
				}
				s.Close()
			}
		}()
	}

	wg.Wait() // publishers and churner
	close(stop)
	rwg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}

	// Every "all" reader still subscribed reads up to the last id (one
	// more event, so that a reader made after the last publish has one).
	last, err := bus.Publish("anchor", "t", nil)
	require.NoError(t, err)
	final := last.ID
	readersMu.Lock()
	defer readersMu.Unlock()
	require.NotEmpty(t, readers)
	for i, r := range readers {
		for {
			ev, err := r.sub.Next(ctx)
			require.NoError(t, err, "all reader %d", i)
			if ev.ID == 0 {
				continue
			}
			r.got = append(r.got, ev.ID)
			if ev.ID >= final {
				break
			}
		}
		for j := 1; j < len(r.got); j++ {
			if r.got[j] != r.got[j-1]+1 {
				t.Fatalf("all reader %d: id %d after %d (gap or disorder)", i, r.got[j], r.got[j-1])
			}
		}
		assert.Equal(t, final, r.got[len(r.got)-1])
		r.sub.Close()
	}
	st := bus.Stats()
	assert.EqualValues(t, final, st.Published, "every id taken is one accepted event")
	assert.Zero(t, st.Subscribers)
	assert.Zero(t, st.Guarded)
	assert.Equal(t, len(bus.Sessions()), st.Sessions)
}
