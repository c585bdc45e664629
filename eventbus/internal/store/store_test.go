package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type rec struct{ id uint64 }

func recID(r **rec) uint64 { return (*r).id }

// The ring Log: records in, records out by cursor, eviction reported.
func TestRingLog(t *testing.T) {
	_, err := NewRing[*rec](0, recID)
	require.Error(t, err, "a size below 1 is refused")
	l, err := NewRing[*rec](3, recID)
	require.NoError(t, err)
	for id := uint64(1); id <= 5; id++ {
		l.Append(&rec{id})
	}
	assert.Equal(t, 3, l.Len())
	assert.Equal(t, uint64(2), l.HighestEvicted(), "ids 1 and 2 were evicted")
	ids := func(rs []*rec) (out []uint64) {
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	assert.Equal(t, []uint64{3, 4, 5}, ids(l.AppendAfter(nil, 0)))
	assert.Equal(t, []uint64{5}, ids(l.AppendAfter(nil, 4)))
	assert.Equal(t, 2, l.CountAfter(3))
	assert.Equal(t, 0, l.CountAfter(5))
	l.MarkEvicted(10)
	assert.Equal(t, uint64(10), l.HighestEvicted())
	l.Clear()
	assert.Zero(t, l.Len())
	assert.Empty(t, l.AppendAfter(nil, 0))
	assert.Equal(t, uint64(10), l.HighestEvicted())
}
