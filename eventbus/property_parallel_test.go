package eventbus_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// TestPropertyParallelPublishers: several publishers at once, each on its
// own goroutine, publish to sessions spread over several session trees,
// while subscribers of every scope — `all` among them — are registered
// before the first publish or join in the middle with a cursor (history,
// then live, across the register/snapshot race). Every subscriber must read
// exactly the ids in its scope, each once, strictly increasing: for `all`
// that is every id of every tree, in one order that one cursor resumes.
// Rings and queues are large enough that nothing may be lost.
func TestPropertyParallelPublishers(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		bus, err := eventbus.New(config.Config{ReplayBufferSize: 10_000, MaxSubscribers: 1000, ReplayBudgetBytes: 1 << 30})
		if err != nil {
			rt.Fatal(err)
		}
		defer bus.Close()

		// The forest: 2–4 roots, each with 0–3 children, some with a
		// grandchild.
		parent := map[string]string{}
		var sessions []string
		for r := range rapid.IntRange(2, 4).Draw(rt, "roots") {
			root := fmt.Sprintf("r%d", r)
			mustRT(rt, bus.CreateSession(root, ""))
			parent[root] = ""
			sessions = append(sessions, root)
			for c := range rapid.IntRange(0, 3).Draw(rt, "children") {
				child := fmt.Sprintf("%s.c%d", root, c)
				mustRT(rt, bus.CreateSession(child, root))
				parent[child] = root
				sessions = append(sessions, child)
				if rapid.Bool().Draw(rt, "grandchild") {
					g := child + ".g"
					mustRT(rt, bus.CreateSession(g, child))
					parent[g] = child
					sessions = append(sessions, g)
				}
			}
		}
		inScope := func(k scope.Kind, x, s string) bool {
			switch k {
			case scope.All:
				return true
			case scope.Session:
				return s == x
			case scope.Descendants:
				for a := s; a != ""; a = parent[a] {
					if a == x {
						return true
					}
				}
				return false
			case scope.Subtree:
				return s == x || (parent[x] != "" && (s == parent[x] || parent[s] == parent[x]))
			}
			return false
		}
		kinds := []scope.Kind{scope.Session, scope.Descendants, scope.Subtree, scope.All}

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		type reader struct {
			name string
			kind scope.Kind
			on   string
			sub  *eventbus.Subscription
			got  []uint64
		}
		subscribe := func(mid bool) *reader {
			rd := &reader{kind: rapid.SampledFrom(kinds).Draw(rt, "scope"), on: rapid.SampledFrom(sessions).Draw(rt, "on")}
			o := eventbus.SubscribeOptions{Scope: rd.kind, MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30, NoReplay: !mid}
			if mid {
				o.Cursor = eventbus.At(0) // everything from the start: history, then live
			}
			sub, err := bus.Subscribe(ctx, rd.on, o)
			if err != nil {
				rt.Fatal(err)
			}
			rd.sub, rd.name = sub, fmt.Sprintf("%v on %s (mid=%v)", rd.kind, rd.on, mid)
			return rd
		}
		// At least one `all` subscriber from the start.
		readers := []*reader{}
		allSub, err := bus.Subscribe(ctx, sessions[0], eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true,
			MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
		if err != nil {
			rt.Fatal(err)
		}
		readers = append(readers, &reader{name: "all (first)", kind: scope.All, on: sessions[0], sub: allSub})
		for range rapid.IntRange(1, 6).Draw(rt, "early") {
			readers = append(readers, subscribe(false))
		}

		// The publishers: each a list of sessions, drawn up front.
		P := rapid.IntRange(2, 4).Draw(rt, "publishers")
		plans := make([][]string, P)
		for p := range plans {
			plans[p] = rapid.SliceOfN(rapid.SampledFrom(sessions), 1, 60).Draw(rt, fmt.Sprintf("plan%d", p))
		}
		lateAt := rapid.IntRange(0, 30).Draw(rt, "late subscriber after n publishes")
		lateCount := rapid.IntRange(0, 3).Draw(rt, "late subscribers")

		var mu sync.Mutex
		published := map[uint64]string{} // id → session
		var wg sync.WaitGroup
		errs := make(chan error, P)
		var late []*reader
		lateReady := make(chan struct{})
		start := make(chan struct{})
		for p := range P {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i, sess := range plans[p] {
					if p == 0 && i == lateAt {
						<-lateReady // the late subscribers join while the others publish on
					}
					ev, err := bus.Publish(sess, "t", nil)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					published[ev.ID] = sess
					mu.Unlock()
				}
			}()
		}
		close(start)
		for range lateCount {
			late = append(late, subscribe(true))
		}
		close(lateReady)
		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatal(err)
		}
		readers = append(readers, late...)

		ids := make([]uint64, 0, len(published))
		for id := range published {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, rd := range readers {
			var want []uint64
			for _, id := range ids {
				if inScope(rd.kind, rd.on, published[id]) {
					want = append(want, id)
				}
			}
			for len(rd.got) < len(want) {
				ev, err := rd.sub.Next(ctx)
				if err != nil {
					rt.Fatalf("%s: after %v: %v (want %v)", rd.name, rd.got, err, want)
				}
				if ev.ID == 0 {
					if ev.Type != eventbus.TypeReplayComplete {
						rt.Fatalf("%s: unexpected frame %s %s", rd.name, ev.Type, ev.Data)
					}
					continue
				}
				if n := len(rd.got); n > 0 && ev.ID <= rd.got[n-1] {
					rt.Fatalf("%s: id %d after %d", rd.name, ev.ID, rd.got[n-1])
				}
				rd.got = append(rd.got, ev.ID)
			}
			if !slices.Equal(rd.got, want) {
				rt.Fatalf("%s: got %v, want %v", rd.name, rd.got, want)
			}
			if ev, ok := rd.sub.TryNext(); ok && ev.ID != 0 {
				rt.Fatalf("%s: extra event %d", rd.name, ev.ID)
			}
			rd.sub.Close()
		}
		if g := bus.Stats().Guarded; g != 0 {
			rt.Fatalf("the reinsert guard fired %d times", g)
		}
	})
}

func mustRT(rt *rapid.T, err error) {
	if err != nil {
		rt.Fatal(err)
	}
}
