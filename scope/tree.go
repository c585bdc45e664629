package scope

import (
	"errors"
	"fmt"
)

// ErrUnknownParent is returned by [Tree.Add] and [Tree.SetParent] when the
// named parent is not in the tree.
var ErrUnknownParent = errors.New("scope: unknown parent session")

// ErrCycle is returned by [Tree.SetParent] when the new parent is the node
// itself or one of its descendants.
var ErrCycle = errors.New("scope: parent would create a cycle")

// ErrExists is returned by [Tree.Add] when the id is already in the tree.
var ErrExists = errors.New("scope: session already in tree")

// Node is one session in a [Tree], carrying the caller's value V. Its links
// change only through the Tree's methods.
type Node[V any] struct {
	// ID is the session id, unique within the tree.
	ID string
	// Value is the caller's data for this session (the event bus keeps its
	// per-session state here).
	Value    V
	parent   *Node[V]
	children map[string]*Node[V]
}

// Parent returns the node's parent, or nil for a root.
func (n *Node[V]) Parent() *Node[V] { return n.parent }

// NumChildren returns the number of direct children.
func (n *Node[V]) NumChildren() int { return len(n.children) }

// Children calls fn for each direct child, in no particular order, until fn
// returns false.
func (n *Node[V]) Children(fn func(*Node[V]) bool) {
	for _, c := range n.children {
		if !fn(c) {
			return
		}
	}
}

// Walk calls fn for n and then every descendant, depth first (a parent
// before its children, siblings in no particular order), until fn returns
// false. It reports whether the walk completed, that is false when fn
// stopped it. It costs O(size of the subtree); fn must not change the tree.
func (n *Node[V]) Walk(fn func(*Node[V]) bool) bool {
	if !fn(n) {
		return false
	}
	for _, c := range n.children {
		if !c.Walk(fn) {
			return false
		}
	}
	return true
}

// IsDescendantOf reports whether n is anc or lies below it. It costs
// O(depth of n).
func (n *Node[V]) IsDescendantOf(anc *Node[V]) bool {
	for p := n; p != nil; p = p.parent {
		if p == anc {
			return true
		}
	}
	return false
}

// Tree is a forest of sessions keyed by id: each node has at most one parent
// and any number of children, and no cycles. The zero value is an empty tree
// ready to use. It is not safe for concurrent use.
type Tree[V any] struct {
	nodes map[string]*Node[V]
}

// Len returns the number of nodes.
func (t *Tree[V]) Len() int { return len(t.nodes) }

// Each calls fn for every node, in no particular order. fn must not add or
// remove nodes.
func (t *Tree[V]) Each(fn func(*Node[V])) {
	for _, n := range t.nodes {
		fn(n)
	}
}

// Get returns the node with the given id, or nil.
func (t *Tree[V]) Get(id string) *Node[V] { return t.nodes[id] }

// Add inserts a new node under parent ("" for a root) and returns it. It
// returns [ErrExists] when id is present and [ErrUnknownParent] when parent is
// not "" and not present, each wrapped with the ids.
func (t *Tree[V]) Add(id, parent string, v V) (*Node[V], error) {
	if _, ok := t.nodes[id]; ok {
		return nil, fmt.Errorf("%w: %q", ErrExists, id)
	}
	var p *Node[V]
	if parent != "" {
		if p = t.nodes[parent]; p == nil {
			return nil, fmt.Errorf("%w: %q (for session %q)", ErrUnknownParent, parent, id)
		}
	}
	if t.nodes == nil {
		t.nodes = make(map[string]*Node[V])
	}
	n := &Node[V]{ID: id, Value: v}
	t.nodes[id] = n
	t.link(n, p)
	return n, nil
}

// SetParent moves node id under parent ("" makes it a root). It returns
// [ErrUnknownParent] for an unknown parent, [ErrCycle] when parent is id
// itself or one of its descendants, and an error naming id when id is not in
// the tree.
func (t *Tree[V]) SetParent(id, parent string) error {
	n := t.nodes[id]
	if n == nil {
		return fmt.Errorf("scope: unknown session %q", id)
	}
	var p *Node[V]
	if parent != "" {
		if p = t.nodes[parent]; p == nil {
			return fmt.Errorf("%w: %q (for session %q)", ErrUnknownParent, parent, id)
		}
		if p.IsDescendantOf(n) {
			return fmt.Errorf("%w: %q under %q", ErrCycle, id, parent)
		}
	}
	t.unlink(n)
	t.link(n, p)
	return nil
}

func (t *Tree[V]) link(n, p *Node[V]) {
	n.parent = p
	if p != nil {
		if p.children == nil {
			p.children = make(map[string]*Node[V])
		}
		p.children[n.ID] = n
	}
}

func (t *Tree[V]) unlink(n *Node[V]) {
	if p := n.parent; p != nil {
		delete(p.children, n.ID)
		if len(p.children) == 0 {
			p.children = nil
		}
		n.parent = nil
	}
}

// Remove deletes node id and returns the removed nodes, the named one first.
// With cascade false its children become roots; with cascade true its whole
// subtree is removed and returned (parents before children). Removing an
// unknown id returns nil.
func (t *Tree[V]) Remove(id string, cascade bool) []*Node[V] {
	n := t.nodes[id]
	if n == nil {
		return nil
	}
	t.unlink(n)
	var out []*Node[V]
	if cascade {
		n.Walk(func(d *Node[V]) bool {
			out = append(out, d)
			delete(t.nodes, d.ID)
			return true
		})
		return out
	}
	delete(t.nodes, id)
	for _, c := range n.children {
		c.parent = nil
	}
	n.children = nil
	return []*Node[V]{n}
}
