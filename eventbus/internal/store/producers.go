package store

import "container/list"

// MaxProducers bounds the idempotent producers a session remembers: in
// memory, the records the checks are made against; over a backend that
// keeps producers, this node's copies of the backend's records. Past it
// the least recently used producer (the one whose last publish or check
// is the oldest) is forgotten. A forgotten producer is then an unknown
// one: its next publish is refused with producer.ErrSequenceGap
// (expected 0) unless it is at sequence 0, so a retry of an accepted
// sequence above 0 is never stored twice (docs/guarantees.md). Over a
// backend, forgetting a copy costs only a read of the backend's record,
// which stays the authority.
const MaxProducers = 1024

// producerLRU is a session's producers, at most MaxProducers, by producer
// id, most recently used first. Not safe for concurrent use: the caller
// holds the lock that guards the session's producers.
type producerLRU[V any] struct {
	byID  map[string]*list.Element // element values: *lruEntry
	order list.List                // front: most recently used
}

type lruEntry[V any] struct {
	id string
	v  V
}

// get returns id's value, marking it the most recently used.
func (c *producerLRU[V]) get(id string) (V, bool) {
	if c == nil {
		var zero V
		return zero, false
	}
	e, ok := c.byID[id]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).v, true
}

// put sets id's value, the most recently used, forgetting the least
// recently used producer when MaxProducers are already remembered.
func (c *producerLRU[V]) put(id string, v V) {
	if e, ok := c.byID[id]; ok {
		e.Value.(*lruEntry[V]).v = v
		c.order.MoveToFront(e)
		return
	}
	if c.byID == nil {
		c.byID = make(map[string]*list.Element)
	}
	if len(c.byID) >= MaxProducers {
		last := c.order.Back()
		delete(c.byID, last.Value.(*lruEntry[V]).id)
		c.order.Remove(last)
	}
	c.byID[id] = c.order.PushFront(&lruEntry[V]{id: id, v: v})
}

// len is how many producers c remembers.
func (c *producerLRU[V]) len() int {
	if c == nil {
		return 0
	}
	return len(c.byID)
}
