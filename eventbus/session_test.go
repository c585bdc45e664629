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

// The session tree of session.go: creating, attaching late, reparenting,
// closing a session with children, the session controller, and all of it
// under churn. (What a scope delivers: scope_test.go; resuming:
// resume_test.go; how sessions, subscriptions and the bus end:
// close_test.go.)

func TestCreateSession(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		setup         func(b *eventbus.Bus)
		id, parent    string
		want          error // nil: success
		wantErrSubstr string
	}{
		{name: "root", id: "a"},
		{name: "child", setup: root("p"), id: "a", parent: "p"},
		{name: "unknown parent", id: "a", parent: "nope", want: scope.ErrUnknownParent, wantErrSubstr: `"nope"`},
		{name: "own parent", setup: root("a"), id: "a", parent: "a", want: scope.ErrCycle},
		{name: "cycle", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("a", ""))
			must(b.CreateSession("b", "a"))
			must(b.CreateSession("c", "b"))
		}, id: "a", parent: "c", want: scope.ErrCycle},
		{name: "parent after publish (attach late)", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			_, err := b.Publish("a", "msg", nil)
			must(err)
		}, id: "a", parent: "p"},
		{name: "parent before publish", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			must(b.CreateSession("a", ""))
		}, id: "a", parent: "p"},
		{name: "same parent again", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			must(b.CreateSession("a", "p"))
		}, id: "a", parent: "p"},
		{name: "another parent", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			must(b.CreateSession("q", ""))
			must(b.CreateSession("a", "p"))
		}, id: "a", parent: "q", want: eventbus.ErrInvalid},
		{name: "closed id reopens", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("a", ""))
			must(b.CloseSession("a"))
		}, id: "a"},
		{name: "closed id reopens under a parent", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			must(b.CreateSession("a", ""))
			must(b.CloseSession("a"))
		}, id: "a", parent: "p"},
		{name: "unknown id under itself", id: "a", parent: "a", want: scope.ErrCycle},
		{name: "closed parent", setup: func(b *eventbus.Bus) {
			must(b.CreateSession("p", ""))
			must(b.CloseSession("p"))
		}, id: "a", parent: "p", want: eventbus.ErrSessionClosed},
		{name: "bad id", id: "a\nb", want: eventbus.ErrInvalid},
		{name: "bad parent", id: "a", parent: "\r", want: eventbus.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			if tt.setup != nil {
				tt.setup(b)
			}
			before := b.LastEventID()
			err := b.CreateSession(tt.id, tt.parent)
			if tt.want == nil {
				require.NoError(t, err)
				assert.True(t, b.SessionExists(tt.id))
				assert.Equal(t, tt.parent, parentOf(b, tt.id))
				return
			}
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.wantErrSubstr)
			assert.Equal(t, before, b.LastEventID(), "a refused CreateSession consumes no id")
		})
	}
	t.Run("after Close", func(t *testing.T) {
		b := newBus(t, eventbus.Options{})
		require.NoError(t, b.Close())
		require.ErrorIs(t, b.CreateSession("a", ""), eventbus.ErrClosed)
	})
}

func root(id string) func(*eventbus.Bus) {
	return func(b *eventbus.Bus) { must(b.CreateSession(id, "")) }
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func parentOf(b *eventbus.Bus, id string) string {
	for _, s := range b.Sessions() {
		if s.ID == id {
			return s.Parent
		}
	}
	return "<missing>"
}

// A session that gets its parent after subscribers joined it: its subtree
// subscribers now hear the parent and the siblings, and the parent's
// descendants subscribers hear it.
func TestCreateSessionReparentsSubscribers(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("P", ""))
	require.NoError(t, b.CreateSession("S", "P"))
	sub := subscribe(t, b, "C", eventbus.SubscribeOptions{Scope: scope.Subtree, NoReplay: true})
	desc := subscribe(t, b, "P", eventbus.SubscribeOptions{Scope: scope.Descendants, NoReplay: true})
	require.NoError(t, b.CreateSession("C", "P"))
	p, _ := b.Publish("P", "msg", nil)
	s, _ := b.Publish("S", "msg", nil)
	c, _ := b.Publish("C", "msg", nil)
	assert.Equal(t, []uint64{p.ID, s.ID, c.ID}, ids(drain(sub)))
	assert.Equal(t, []uint64{p.ID, s.ID, c.ID}, ids(drain(desc)))
}

// Closing a middle session moves its children up to its parent: an
// ancestor's descendants subscriber keeps hearing them, and a child's
// subtree subscriber now has the grandparent as parent and its former
// uncles as siblings (AgentPool keeps the closed link, so its descendants
// subscriber keeps hearing them too).
func TestCloseMovesChildrenUp(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("X", ""))
	require.NoError(t, b.CreateSession("C", "X"))
	require.NoError(t, b.CreateSession("U", "X"))
	require.NoError(t, b.CreateSession("G", "C"))
	require.NoError(t, b.CreateSession("G2", "C"))
	desc := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: scope.Descendants})
	sub := subscribe(t, b, "G", eventbus.SubscribeOptions{Scope: scope.Subtree})
	require.NoError(t, b.CloseSession("C"))
	closed := b.LastEventID()
	g, _ := b.Publish("G", "msg", nil)
	g2, _ := b.Publish("G2", "msg", nil)
	u, _ := b.Publish("U", "msg", nil)
	x, _ := b.Publish("X", "msg", nil)
	assert.Equal(t, []uint64{closed, g.ID, g2.ID, u.ID, x.ID}, ids(drain(desc)))
	assert.Equal(t, []uint64{closed, g.ID, g2.ID, u.ID, x.ID}, ids(drain(sub)))
	assert.Equal(t, "X", parentOf(b, "G"))
	assert.Equal(t, "X", parentOf(b, "G2"))
}

// TestParallelTreesUnderChurn: publishers on several session trees run
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
func TestParallelTreesUnderChurn(t *testing.T) {
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

// TestPanickingSessionControllerDoesNotWedgeTheBus: the session
// controller runs with the structure lock held exclusively. A controller
// that panics used to take that lock with it — Publish panicked and every
// later call of the bus (and Close) waited forever. Now the call that
// created the session returns an ErrInvalid error naming the panic, nothing
// is created for it, and the bus goes on.
func TestPanickingSessionControllerDoesNotWedgeTheBus(t *testing.T) {
	bus := newBus(t, eventbus.Options{SessionController: func(id string) string {
		switch id {
		case "boom":
			panic("controller bug")
		case "child":
			return "boom" // the parent's lookup panics
		}
		return ""
	}})
	for _, id := range []string{"boom", "child"} {
		var err error
		require.NotPanics(t, func() { _, err = bus.Publish(id, "t", nil) }, "publish %s", id)
		require.ErrorIs(t, err, eventbus.ErrInvalid)
		assert.Contains(t, err.Error(), "controller bug")
		assert.False(t, bus.SessionExists(id))
		require.NotPanics(t, func() {
			_, err = bus.Subscribe(context.Background(), id, eventbus.SubscribeOptions{})
		}, "subscribe %s", id)
		require.ErrorIs(t, err, eventbus.ErrInvalid)
	}
	// The bus is not wedged.
	_, err := bus.Publish("fine", "t", nil)
	require.NoError(t, err)
	require.NoError(t, bus.CreateSession("boom", "")) // CreateSession does not ask
	_, err = bus.Publish("boom", "t", nil)
	require.NoError(t, err)
}
