package scope_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/scope"
)

// build returns the tree
//
//	a ─┬─ b ── d ── e
//	   └─ c
//	f
//
// with each node's value being its id.
func build(t *testing.T) *scope.Tree[string] {
	t.Helper()
	var tr scope.Tree[string]
	for _, e := range [][2]string{{"a", ""}, {"b", "a"}, {"c", "a"}, {"d", "b"}, {"e", "d"}, {"f", ""}} {
		n, err := tr.Add(e[0], e[1], e[0])
		require.NoError(t, err)
		require.Equal(t, e[0], n.ID)
	}
	return &tr
}

// parentOf returns the id of id's parent, "" for a root, "<none>" when id is
// not in the tree.
func parentOf(tr *scope.Tree[string], id string) string {
	n := tr.Get(id)
	if n == nil {
		return "<none>"
	}
	if p := n.Parent(); p != nil {
		return p.ID
	}
	return ""
}

// children returns the sorted ids of n's direct children.
func children(n *scope.Node[string]) []string {
	out := []string{}
	n.Children(func(c *scope.Node[string]) bool { out = append(out, c.ID); return true })
	sort.Strings(out)
	return out
}

// subtree returns the sorted ids Walk visits from id.
func subtree(tr *scope.Tree[string], id string) []string {
	out := []string{}
	tr.Get(id).Walk(func(n *scope.Node[string]) bool { out = append(out, n.ID); return true })
	sort.Strings(out)
	return out
}

func TestZeroTree(t *testing.T) {
	t.Parallel()
	var tr scope.Tree[int]
	assert.Zero(t, tr.Len())
	assert.Nil(t, tr.Get("a"))
	assert.Nil(t, tr.Remove("a", true))
	assert.EqualError(t, tr.SetParent("a", ""), `scope: unknown session "a"`)
	tr.Each(func(*scope.Node[int]) { t.Fatal("Each on an empty tree") })
	n, err := tr.Add("a", "", 7)
	require.NoError(t, err)
	assert.Equal(t, 7, n.Value)
	assert.Same(t, n, tr.Get("a"))
}

func TestAdd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, parent string
		wantErr          error
		wantText         string
	}{
		{name: "new root", id: "x", parent: ""},
		{name: "new child", id: "x", parent: "e"},
		{name: "existing root id", id: "a", parent: "", wantErr: scope.ErrExists, wantText: `scope: session already in tree: "a"`},
		{name: "existing child id", id: "d", parent: "c", wantErr: scope.ErrExists, wantText: `scope: session already in tree: "d"`},
		{name: "unknown parent", id: "x", parent: "zz", wantErr: scope.ErrUnknownParent, wantText: `scope: unknown parent session: "zz" (for session "x")`},
		{name: "itself as parent", id: "x", parent: "x", wantErr: scope.ErrUnknownParent, wantText: `scope: unknown parent session: "x" (for session "x")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := build(t)
			n, err := tr.Add(tt.id, tt.parent, "new")
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				assert.EqualError(t, err, tt.wantText)
				assert.Nil(t, n)
				assert.Equal(t, 6, tr.Len(), "a failed Add changes nothing")
				if old := tr.Get(tt.id); old != nil {
					assert.Equal(t, tt.id, old.Value, "the existing node keeps its value")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 7, tr.Len())
			assert.Equal(t, "new", n.Value)
			assert.Equal(t, tt.parent, parentOf(tr, tt.id))
			assert.Zero(t, n.NumChildren())
			if tt.parent != "" {
				assert.Contains(t, children(tr.Get(tt.parent)), tt.id)
				assert.True(t, n.IsDescendantOf(tr.Get("a")), "a child of e lies below a")
			}
		})
	}
}

func TestSetParent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, parent string
		wantErr          error
		wantText         string
		check            func(t *testing.T, tr *scope.Tree[string])
	}{
		{name: "move a subtree", id: "d", parent: "c", check: func(t *testing.T, tr *scope.Tree[string]) {
			assert.Equal(t, "c", parentOf(tr, "d"))
			assert.Equal(t, []string{}, children(tr.Get("b")))
			assert.Equal(t, []string{"d"}, children(tr.Get("c")))
			assert.Equal(t, []string{"c", "d", "e"}, subtree(tr, "c"))
			assert.Equal(t, []string{"b"}, subtree(tr, "b"))
			assert.False(t, tr.Get("e").IsDescendantOf(tr.Get("b")))
			assert.True(t, tr.Get("e").IsDescendantOf(tr.Get("c")))
		}},
		{name: "make a root", id: "b", parent: "", check: func(t *testing.T, tr *scope.Tree[string]) {
			assert.Equal(t, "", parentOf(tr, "b"))
			assert.Nil(t, tr.Get("b").Parent())
			assert.Equal(t, []string{"c"}, children(tr.Get("a")))
			assert.Equal(t, []string{"b", "d", "e"}, subtree(tr, "b"))
		}},
		{name: "root under another tree", id: "f", parent: "e", check: func(t *testing.T, tr *scope.Tree[string]) {
			assert.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, subtree(tr, "a"))
			assert.True(t, tr.Get("f").IsDescendantOf(tr.Get("a")))
		}},
		{name: "same parent is a no-op", id: "d", parent: "b", check: func(t *testing.T, tr *scope.Tree[string]) {
			assert.Equal(t, "b", parentOf(tr, "d"))
			assert.Equal(t, []string{"d"}, children(tr.Get("b")))
		}},
		{name: "root stays root", id: "a", parent: "", check: func(t *testing.T, tr *scope.Tree[string]) {
			assert.Equal(t, "", parentOf(tr, "a"))
		}},
		{name: "unknown session", id: "zz", parent: "a", wantText: `scope: unknown session "zz"`},
		{name: "unknown parent", id: "d", parent: "zz", wantErr: scope.ErrUnknownParent, wantText: `scope: unknown parent session: "zz" (for session "d")`},
		{name: "itself", id: "b", parent: "b", wantErr: scope.ErrCycle, wantText: `scope: parent would create a cycle: "b" under "b"`},
		{name: "its child", id: "b", parent: "d", wantErr: scope.ErrCycle, wantText: `scope: parent would create a cycle: "b" under "d"`},
		{name: "its grandchild", id: "a", parent: "e", wantErr: scope.ErrCycle, wantText: `scope: parent would create a cycle: "a" under "e"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := build(t)
			err := tr.SetParent(tt.id, tt.parent)
			if tt.wantText != "" {
				assert.EqualError(t, err, tt.wantText)
				if tt.wantErr != nil {
					assert.ErrorIs(t, err, tt.wantErr)
				}
				// A refused move changes nothing.
				assert.Equal(t, build(t).Len(), tr.Len())
				for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
					assert.Equal(t, parentOf(build(t), id), parentOf(tr, id), id)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 6, tr.Len())
			tt.check(t, tr)
		})
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	t.Run("without cascade children become roots", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		removed := tr.Remove("b", false)
		require.Len(t, removed, 1)
		assert.Equal(t, "b", removed[0].ID)
		assert.Nil(t, removed[0].Parent())
		assert.Zero(t, removed[0].NumChildren())
		assert.Nil(t, tr.Get("b"))
		assert.Equal(t, 5, tr.Len())
		assert.Equal(t, "", parentOf(tr, "d"), "d is a root now")
		assert.Equal(t, "d", parentOf(tr, "e"), "d keeps its own children")
		assert.Equal(t, []string{"c"}, children(tr.Get("a")))
		assert.False(t, tr.Get("e").IsDescendantOf(tr.Get("a")))
	})
	t.Run("cascade removes the subtree, parents first", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		removed := tr.Remove("b", true)
		ids := make([]string, len(removed))
		for i, n := range removed {
			ids[i] = n.ID
		}
		assert.Equal(t, []string{"b", "d", "e"}, ids, "b first, then parents before children")
		assert.Nil(t, removed[0].Parent(), "the named node is unlinked from its parent")
		for _, id := range ids {
			assert.Nil(t, tr.Get(id), id)
		}
		assert.Equal(t, 3, tr.Len())
		assert.Equal(t, []string{"c"}, children(tr.Get("a")))
		assert.Equal(t, []string{"a", "c"}, subtree(tr, "a"))
	})
	t.Run("cascade on a root with siblings", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		removed := tr.Remove("a", true)
		assert.Len(t, removed, 5)
		assert.Equal(t, "a", removed[0].ID)
		assert.Equal(t, 1, tr.Len())
		assert.NotNil(t, tr.Get("f"))
	})
	t.Run("leaf", func(t *testing.T) {
		t.Parallel()
		for _, cascade := range []bool{false, true} {
			tr := build(t)
			removed := tr.Remove("e", cascade)
			require.Len(t, removed, 1)
			assert.Zero(t, tr.Get("d").NumChildren())
			assert.Equal(t, 5, tr.Len())
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		assert.Nil(t, tr.Remove("zz", false))
		assert.Nil(t, tr.Remove("zz", true))
		assert.Equal(t, 6, tr.Len())
	})
	t.Run("the id can be added again", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		tr.Remove("b", true)
		n, err := tr.Add("b", "c", "again")
		require.NoError(t, err)
		assert.Zero(t, n.NumChildren(), "a re-added id does not inherit the old children")
		assert.Equal(t, []string{"b", "c"}, subtree(tr, "c"))
	})
}

func TestWalk(t *testing.T) {
	t.Parallel()
	tr := build(t)
	tests := []struct {
		from string
		want []string
	}{
		{"a", []string{"a", "b", "c", "d", "e"}},
		{"b", []string{"b", "d", "e"}},
		{"e", []string{"e"}},
		{"f", []string{"f"}},
	}
	for _, tt := range tests {
		t.Run(tt.from, func(t *testing.T) {
			t.Parallel()
			var order []string
			done := tr.Get(tt.from).Walk(func(n *scope.Node[string]) bool {
				order = append(order, n.ID)
				return true
			})
			assert.True(t, done, "a full walk returns true")
			require.NotEmpty(t, order)
			assert.Equal(t, tt.from, order[0], "the start node comes first")
			for i, id := range order {
				if p := parentOf(tr, id); id != tt.from {
					assert.Less(t, slices.Index(order, p), i, "%s's parent %s comes before it", id, p)
				}
			}
			sorted := slices.Sorted(slices.Values(order))
			assert.Equal(t, tt.want, sorted)
		})
	}
	t.Run("stop early", func(t *testing.T) {
		t.Parallel()
		var visited int
		done := tr.Get("a").Walk(func(n *scope.Node[string]) bool {
			visited++
			return visited < 2
		})
		assert.False(t, done)
		assert.Equal(t, 2, visited)

		visited = 0
		done = tr.Get("a").Walk(func(*scope.Node[string]) bool { visited++; return false })
		assert.False(t, done)
		assert.Equal(t, 1, visited)
	})
	t.Run("sees children added later", func(t *testing.T) {
		t.Parallel()
		tr := build(t)
		_, err := tr.Add("g", "c", "g")
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b", "c", "d", "e", "g"}, subtree(tr, "a"))
	})
}

func TestIsDescendantOf(t *testing.T) {
	t.Parallel()
	tr := build(t)
	tests := []struct {
		n, anc string
		want   bool
	}{
		{"a", "a", true},
		{"b", "a", true},
		{"e", "a", true},
		{"e", "b", true},
		{"e", "d", true},
		{"a", "b", false},
		{"b", "c", false},
		{"c", "b", false},
		{"d", "e", false},
		{"f", "a", false},
		{"a", "f", false},
	}
	for _, tt := range tests {
		t.Run(tt.n+"_under_"+tt.anc, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tr.Get(tt.n).IsDescendantOf(tr.Get(tt.anc)))
		})
	}
	assert.False(t, tr.Get("a").IsDescendantOf(nil))
}

func TestChildrenAndEach(t *testing.T) {
	t.Parallel()
	tr := build(t)
	assert.Equal(t, 2, tr.Get("a").NumChildren())
	assert.Equal(t, []string{"b", "c"}, children(tr.Get("a")))

	calls := 0
	tr.Get("a").Children(func(*scope.Node[string]) bool { calls++; return false })
	assert.Equal(t, 1, calls, "Children stops when fn returns false")

	var all []string
	tr.Each(func(n *scope.Node[string]) { all = append(all, n.ID) })
	sort.Strings(all)
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, all)
}

// TestTreeModel compares a Tree with a plain parent map under random Add,
// SetParent and Remove calls.
func TestTreeModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var tr scope.Tree[int]
		model := map[string]string{} // id → parent id ("" for a root)
		ids := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
		anyID := rapid.SampledFrom(ids)
		parentID := rapid.SampledFrom(append([]string{""}, ids...))
		// below reports whether x is anc or lies below it in the model.
		below := func(x, anc string) bool {
			for ; x != ""; x = model[x] {
				if x == anc {
					return true
				}
			}
			return false
		}
		t.Repeat(map[string]func(*rapid.T){
			"Add": func(t *rapid.T) {
				id, p := anyID.Draw(t, "id"), parentID.Draw(t, "parent")
				_, err := tr.Add(id, p, 0)
				_, exists := model[id]
				_, known := model[p]
				switch {
				case exists:
					if !errors.Is(err, scope.ErrExists) {
						t.Fatalf("Add(%s, %s) = %v, want ErrExists", id, p, err)
					}
				case p != "" && !known:
					if !errors.Is(err, scope.ErrUnknownParent) {
						t.Fatalf("Add(%s, %s) = %v, want ErrUnknownParent", id, p, err)
					}
				default:
					if err != nil {
						t.Fatalf("Add(%s, %s): %v", id, p, err)
					}
					model[id] = p
				}
			},
			"SetParent": func(t *rapid.T) {
				id, p := anyID.Draw(t, "id"), parentID.Draw(t, "parent")
				err := tr.SetParent(id, p)
				_, exists := model[id]
				_, known := model[p]
				switch {
				case !exists:
					if err == nil {
						t.Fatalf("SetParent(%s, %s) of an unknown id succeeded", id, p)
					}
				case p != "" && !known:
					if !errors.Is(err, scope.ErrUnknownParent) {
						t.Fatalf("SetParent(%s, %s) = %v, want ErrUnknownParent", id, p, err)
					}
				case p != "" && below(p, id):
					if !errors.Is(err, scope.ErrCycle) {
						t.Fatalf("SetParent(%s, %s) = %v, want ErrCycle", id, p, err)
					}
				default:
					if err != nil {
						t.Fatalf("SetParent(%s, %s): %v", id, p, err)
					}
					model[id] = p
				}
			},
			"Remove": func(t *rapid.T) {
				id, cascade := anyID.Draw(t, "id"), rapid.Bool().Draw(t, "cascade")
				var want []string
				if _, ok := model[id]; ok {
					for x := range model {
						if x == id || cascade && below(x, id) {
							want = append(want, x)
						}
					}
				}
				var got []string
				for _, n := range tr.Remove(id, cascade) {
					got = append(got, n.ID)
				}
				if len(got) > 0 && got[0] != id {
					t.Fatalf("Remove(%s) returned %v first", id, got)
				}
				sort.Strings(got)
				sort.Strings(want)
				if !slices.Equal(got, want) {
					t.Fatalf("Remove(%s, %v) = %v, want %v", id, cascade, got, want)
				}
				for _, x := range want {
					delete(model, x)
				}
				for x, p := range model {
					if p == id {
						model[x] = "" // orphans become roots
					}
				}
			},
			"": func(t *rapid.T) {
				if tr.Len() != len(model) {
					t.Fatalf("Len %d, model %d", tr.Len(), len(model))
				}
				for id, p := range model {
					n := tr.Get(id)
					if n == nil {
						t.Fatalf("%s missing", id)
					}
					got := ""
					if n.Parent() != nil {
						got = n.Parent().ID
					}
					if got != p {
						t.Fatalf("parent of %s = %q, want %q", id, got, p)
					}
					var walked []string
					n.Walk(func(d *scope.Node[int]) bool { walked = append(walked, d.ID); return true })
					var want []string
					for x := range model {
						if below(x, id) {
							want = append(want, x)
						}
						if tr.Get(x).IsDescendantOf(n) != below(x, id) {
							t.Fatalf("%s.IsDescendantOf(%s) = %v", x, id, !below(x, id))
						}
					}
					sort.Strings(walked)
					sort.Strings(want)
					if !slices.Equal(walked, want) {
						t.Fatalf("Walk(%s) = %v, want %v", id, walked, want)
					}
				}
			},
		})
	})
}

func BenchmarkIsDescendantOf(b *testing.B) {
	var tr scope.Tree[int]
	prev := ""
	for i := range 64 {
		id := fmt.Sprint("s", i)
		if _, err := tr.Add(id, prev, i); err != nil {
			b.Fatal(err)
		}
		prev = id
	}
	leaf, root := tr.Get(prev), tr.Get("s0")
	b.ReportAllocs()
	for b.Loop() {
		if !leaf.IsDescendantOf(root) {
			b.Fatal("not below")
		}
	}
}
