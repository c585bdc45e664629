package eventbus_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The tree of the scope tests:
//
//	P ─┬─ X ─── C ─── G        U (unrelated root)
//	   └─ S ─── N (nephew)
//
// created after subscribing: L under X, LG under C, S2 under P, N2 under S.
func TestScopes(t *testing.T) {
	t.Parallel()
	early := []string{"P", "X", "C", "G", "S", "N", "U"}
	late := []string{"L", "LG", "S2", "N2"}
	tests := []struct {
		kind scope.Kind
		want []string // sessions whose events arrive
	}{
		{scope.Session, []string{"X"}},
		{scope.Descendants, []string{"X", "C", "G", "L", "LG"}},
		{scope.Subtree, []string{"X", "P", "S", "S2"}},
		{scope.All, append(slices.Clone(early), late...)},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			for _, e := range [][2]string{{"P", ""}, {"X", "P"}, {"C", "X"}, {"G", "C"}, {"S", "P"}, {"N", "S"}, {"U", ""}} {
				require.NoError(t, b.CreateSession(e[0], e[1]))
			}
			in := func(sess string) bool { return slices.Contains(tt.want, sess) }
			var wantReplay, wantLive []uint64
			for _, sess := range early {
				ev, err := b.Publish(sess, "msg", sess)
				require.NoError(t, err)
				if in(sess) {
					wantReplay = append(wantReplay, ev.ID)
				}
			}
			s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: tt.kind, Cursor: eventbus.At(0)})
			assert.Equal(t, tt.kind, s.Scope())
			assert.Equal(t, "X", s.Session())
			for _, e := range [][2]string{{"L", "X"}, {"LG", "C"}, {"S2", "P"}, {"N2", "S"}} {
				require.NoError(t, b.CreateSession(e[0], e[1]))
			}
			for _, sess := range append(slices.Clone(early), late...) {
				ev, err := b.Publish(sess, "msg", sess)
				require.NoError(t, err)
				if in(sess) {
					wantLive = append(wantLive, ev.ID)
				}
			}
			got := drain(s)
			n := len(wantReplay)
			require.Len(t, got, n+1+len(wantLive), "%v", describe(got))
			assert.Equal(t, wantReplay, ids(got[:n]), "replay, merged by id")
			assert.Equal(t, frame.TypeReplayComplete, got[n].Type)
			assert.Equal(t, wantLive, ids(got[n+1:]), "live")
			for _, e := range got {
				if e.ID != 0 {
					assert.True(t, in(e.Session), "event of %s", e.Session)
					assert.Equal(t, e.ID <= wantReplay[n-1], e.Replay)
				}
			}
		})
	}
}

// A descendants subscriber that disconnects resumes the merged stream of
// the subtree with one cursor: no gap, no duplicate.
func TestDescendantsResume(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 100})
	require.NoError(t, b.CreateSession("X", ""))
	require.NoError(t, b.CreateSession("C", "X"))
	require.NoError(t, b.CreateSession("G", "C"))
	var want []uint64
	pub := func(rounds int) {
		for i := 0; i < rounds; i++ {
			for _, sess := range []string{"X", "U", "G", "C", "G"} {
				ev, err := b.Publish(sess, "msg", i)
				require.NoError(t, err)
				if sess != "U" {
					want = append(want, ev.ID)
				}
			}
		}
	}
	pub(3)
	var got []uint64
	var cursor *eventbus.Position
	for round := 0; round < 5; round++ {
		s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: cursor})
		pub(2)
		evs := drain(s)
		assert.Equal(t, 0, count(evs, frame.TypeStateResyncRequired), "round %d: %v", round, describe(evs))
		// Read only part of it, then disconnect.
		part := ids(evs)
		part = part[:len(part)-round]
		got = append(got, part...)
		cursor = eventbus.At(part[len(part)-1])
		s.Close()
		pub(1)
	}
	s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: scope.Descendants, Cursor: cursor})
	got = append(got, ids(drain(s))...)
	assert.Equal(t, want, got)
}

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
