package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// producerLRU keeps at most MaxProducers, forgetting the least recently
// used: a get or a put makes a producer the most recently used.
func TestProducerLRUForgetsLeastRecentlyUsed(t *testing.T) {
	require.Equal(t, 1024, MaxProducers, "the documented bound (docs/durable-streams.md, docs/guarantees.md)")
	var c *producerLRU[int]
	_, ok := c.get("a")
	require.False(t, ok, "a nil table knows nobody")
	require.Zero(t, c.len())
	c = new(producerLRU[int])
	for i := range MaxProducers {
		c.put(fmt.Sprint(i), i)
	}
	require.Equal(t, MaxProducers, c.len())
	v, ok := c.get("0") // 0 is now the most recently used; 1 the least
	require.True(t, ok)
	require.Equal(t, 0, v)
	c.put("2", 20) // an update is no new producer
	require.Equal(t, MaxProducers, c.len())
	c.put("new", -1)
	require.Equal(t, MaxProducers, c.len(), "the table never grows past MaxProducers")
	_, ok = c.get("1")
	require.False(t, ok, "the least recently used producer is forgotten")
	for _, id := range []string{"0", "2", "3", "new"} {
		_, ok = c.get(id)
		require.True(t, ok, id)
	}
	v, _ = c.get("2")
	require.Equal(t, 20, v)
	for i := range 10 * MaxProducers {
		c.put(fmt.Sprint("churn-", i), i)
	}
	require.Equal(t, MaxProducers, c.len())
	require.Len(t, c.byID, c.order.Len())
}
