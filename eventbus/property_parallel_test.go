package eventbus_test

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// TestPropertyParallelPublishers: several publishers at once, each on its
// own goroutine, publish to sessions spread over several session trees —
// which the bus publishes to in parallel, each under its own tree lock —
// while subscribers of every scope — `all` among them — are registered
// before the first publish or join in the middle with a cursor (from the
// start, or from any id so far: history, then live, across the
// register/snapshot race), while one tree's root may be attached under
// another tree in the middle (two trees merge), and while an `all`
// subscriber reads part of its stream, goes away and resumes from the last
// id it read. Every subscriber must read exactly the ids in its scope above
// its cursor, each once, strictly increasing: for `all` that is every id of
// every tree, in one order that one cursor resumes. Rings and queues are
// large enough that nothing may be lost.
//
// The attachment is the one thing the model cannot time: events of the
// sessions that come into a subscriber's scope by it (the attached tree for
// the new ancestors' descendants and the new siblings' subtree; the new
// parent and siblings for the attached root's subtree) reach the
// subscriber from some id on. So for those the test requires a suffix (by
// id) of them: every one published after CreateSession returned, none
// published before it was called for a subscriber already registered then
// (ids are compared with LastEventID read around the call; an attachment
// excludes every publisher, so it splits the ids in two).
//
// A hook yields the processor inside every publish's tree-locked section,
// right after the id is taken, so that publishers interleave where a lock
// that did not cover the id, the append and the fan-out together would
// let ids cross (the test is not parallel: the hook is global).
func TestPropertyParallelPublishers(t *testing.T) {
	eventbus.SetTestHookTreeLocked(func(string) { runtime.Gosched() })
	defer eventbus.SetTestHookTreeLocked(nil)
	rapid.Check(t, func(rt *rapid.T) {
		bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10_000, MaxSubscribers: 1000, ReplayBudgetBytes: 1 << 30})
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
		// after is the forest once the attachment (if any) is done.
		after := maps.Clone(parent)
		var attached, attachTo string
		if roots := len(sessions) - countChildren(parent); roots > 1 && rapid.Bool().Draw(rt, "attach") {
			var rootsList []string
			for _, x := range sessions {
				if parent[x] == "" {
					rootsList = append(rootsList, x)
				}
			}
			attached = rapid.SampledFrom(rootsList[1:]).Draw(rt, "attached")
			var targets []string
			for _, x := range sessions {
				if rootOf(parent, x) != attached {
					targets = append(targets, x)
				}
			}
			attachTo = rapid.SampledFrom(targets).Draw(rt, "attachTo")
			after[attached] = attachTo
		}
		inScope := func(parent map[string]string, k scope.Kind, x, s string) bool {
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
			name   string
			kind   scope.Kind
			on     string
			sub    *eventbus.Subscription
			cursor uint64 // it reads the ids above this
			early  bool   // registered before the attachment began
			got    []uint64
		}
		attaching := false // the attachment has begun (main goroutine only)
		subscribe := func(mid bool) *reader {
			rd := &reader{kind: rapid.SampledFrom(kinds).Draw(rt, "scope"), on: rapid.SampledFrom(sessions).Draw(rt, "on"), early: !attaching}
			o := eventbus.SubscribeOptions{Scope: rd.kind, MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30, NoReplay: !mid}
			if mid {
				// Everything from the start, or from any id so far: the
				// history above it, then live.
				frac := rapid.SampledFrom([]float64{0, 0, 0.3, 0.7, 1}).Draw(rt, "cursor fraction")
				rd.cursor = uint64(frac * float64(bus.LastEventID()))
				o.Cursor = eventbus.At(rd.cursor)
			}
			sub, err := bus.Subscribe(ctx, rd.on, o)
			if err != nil {
				rt.Fatal(err)
			}
			rd.sub, rd.name = sub, fmt.Sprintf("%v on %s (mid=%v, cursor %d)", rd.kind, rd.on, mid, rd.cursor)
			return rd
		}
		// At least one `all` subscriber from the start.
		readers := []*reader{}
		allSub, err := bus.Subscribe(ctx, sessions[0], eventbus.SubscribeOptions{Scope: scope.All, NoReplay: true,
			MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
		if err != nil {
			rt.Fatal(err)
		}
		readers = append(readers, &reader{name: "all (first)", kind: scope.All, on: sessions[0], sub: allSub, early: true})
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
		attachAfter := rapid.IntRange(0, lateCount).Draw(rt, "attach after n late subscribers")
		total := 0
		for _, pl := range plans {
			total += len(pl)
		}
		resumeAfter := rapid.IntRange(0, total).Draw(rt, "all resumes after n events")

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
		var lo, hi uint64 // ids ≤ lo were published before the attachment, ids > hi after
		for i := range lateCount + 1 {
			if i == attachAfter && attached != "" {
				attaching = true
				lo = bus.LastEventID()
				mustRT(rt, bus.CreateSession(attached, attachTo))
				hi = bus.LastEventID()
			}
			if i < lateCount {
				late = append(late, subscribe(true))
			}
		}
		close(lateReady)
		// An `all` subscriber reads part of its stream while the
		// publishers go on, goes away, and resumes from the last id it
		// read: one cursor for every tree.
		resumed := &reader{name: "all (resumed)", kind: scope.All, on: sessions[len(sessions)-1]}
		{
			firstFrom := bus.LastEventID() // it reads every id above this
			first, err := bus.Subscribe(ctx, resumed.on, eventbus.SubscribeOptions{Scope: scope.All,
				Cursor: eventbus.At(firstFrom), MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
			if err != nil {
				rt.Fatal(err)
			}
			var part []uint64
			for len(part) < resumeAfter && firstFrom+uint64(len(part)) < uint64(total) {
				ev, err := first.Next(ctx)
				if err != nil {
					rt.Fatalf("all (before resume): %v after %v", err, part)
				}
				if ev.ID == 0 && ev.Type == frame.TypeReplayComplete {
					continue
				}
				if n := len(part); ev.ID <= firstFrom || n > 0 && ev.ID <= part[n-1] {
					rt.Fatalf("all (before resume): id %d after %v (subscribed at %d)", ev.ID, part, firstFrom)
				}
				part = append(part, ev.ID)
			}
			first.Close()
			resumed.cursor = firstFrom
			if n := len(part); n > 0 {
				resumed.cursor = part[n-1]
			}
			resumed.sub, err = bus.Subscribe(ctx, resumed.on, eventbus.SubscribeOptions{Scope: scope.All,
				Cursor: eventbus.At(resumed.cursor), MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
			if err != nil {
				rt.Fatal(err)
			}
			resumed.name = fmt.Sprintf("all (resumed at %d)", resumed.cursor)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatal(err)
		}
		readers = append(readers, late...)
		readers = append(readers, resumed)

		ids := make([]uint64, 0, len(published))
		for id := range published {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, rd := range readers {
			// must: in scope before and after the attachment; late: only
			// after (a suffix of them arrives, see above).
			var must, lateIDs []uint64
			for _, id := range ids {
				if id <= rd.cursor {
					continue
				}
				before, now := inScope(parent, rd.kind, rd.on, published[id]), inScope(after, rd.kind, rd.on, published[id])
				switch {
				case before && !now:
					rt.Fatalf("%s: the attachment took session %s out of scope", rd.name, published[id])
				case before:
					must = append(must, id)
				case now:
					lateIDs = append(lateIDs, id)
				}
			}
			// Every publish has returned, and a publish queues its event
			// for every subscriber before it returns: all is queued, so
			// the queue is read to its end without waiting.
			for {
				ev, ok := rd.sub.TryNext()
				if !ok {
					break
				}
				if ev.ID == 0 && ev.Type == frame.TypeReplayComplete {
					continue
				}
				if ev.ID == 0 {
					rt.Fatalf("%s: unexpected frame %s %s", rd.name, ev.Type, ev.Data)
				}
				if n := len(rd.got); n > 0 && ev.ID <= rd.got[n-1] {
					rt.Fatalf("%s: id %d after %d", rd.name, ev.ID, rd.got[n-1])
				}
				rd.got = append(rd.got, ev.ID)
			}
			// The late ones it got: a suffix of lateIDs, reaching down at
			// least to the first published after the attachment and, for a
			// subscriber registered before it, not below it.
			var gotLate []uint64
			for _, id := range rd.got {
				if slices.Contains(lateIDs, id) {
					gotLate = append(gotLate, id)
				}
			}
			from := len(lateIDs) - len(gotLate)
			if from < 0 || !slices.Equal(gotLate, lateIDs[from:]) {
				rt.Fatalf("%s: of the sessions the attachment brought into scope it got %v, not a suffix of %v", rd.name, gotLate, lateIDs)
			}
			if from > 0 && lateIDs[from-1] > hi {
				rt.Fatalf("%s: missed %d, published after the attachment (ids > %d)", rd.name, lateIDs[from-1], hi)
			}
			if rd.early && len(gotLate) > 0 && gotLate[0] <= lo {
				rt.Fatalf("%s: got %d, published before the attachment (ids ≤ %d)", rd.name, gotLate[0], lo)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(must), gotLate...)))
			if !slices.Equal(rd.got, want) {
				rt.Fatalf("%s: got %v, want %v", rd.name, rd.got, want)
			}
			rd.sub.Close()
		}
		if g := bus.Stats().Guarded; g != 0 {
			rt.Fatalf("the reinsert guard fired %d times", g)
		}
	})
}

// countChildren returns how many sessions of the forest have a parent.
func countChildren(parent map[string]string) int {
	n := 0
	for _, p := range parent {
		if p != "" {
			n++
		}
	}
	return n
}

// rootOf returns the root of x's tree in the forest.
func rootOf(parent map[string]string, x string) string {
	for parent[x] != "" {
		x = parent[x]
	}
	return x
}

func mustRT(rt *rapid.T, err error) {
	if err != nil {
		rt.Fatal(err)
	}
}
