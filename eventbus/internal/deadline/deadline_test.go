package deadline

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type waiter struct {
	slot Slot
	name int
}

// checkHeap asserts the heap order and that every slot knows its position.
func checkHeap[T any](t *testing.T, q *Queue[T]) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.h {
		require.Equal(t, int32(i+1), e.slot.idx, "heap positions stay in step")
		if i > 0 {
			require.LessOrEqual(t, q.h[(i-1)/2].at, e.at, "heap order")
		}
	}
}

// Entries fire in deadline order, each once, on the queue's one timer;
// an entry moves earlier but never later; removed entries never fire.
func TestQueueFiresDueEntriesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var fired []int
		q := New(func(w *waiter, at, now int64) {
			mu.Lock()
			fired = append(fired, w.name)
			mu.Unlock()
			assert.LessOrEqual(t, at, now, "never early")
		})
		start := q.Now()
		ws := make([]*waiter, 50)
		for i := range ws {
			ws[i] = &waiter{name: i}
		}
		for _, i := range rand.Perm(len(ws)) {
			q.Add(start+int64(i+1)*int64(time.Millisecond), &ws[i].slot, ws[i])
			checkHeap(t, q)
		}
		q.Add(start+int64(time.Hour), &ws[3].slot, ws[3]) // later: kept where it was
		q.Add(start+int64(time.Microsecond), &ws[40].slot, ws[40])
		checkHeap(t, q)
		q.Remove(&ws[7].slot)
		q.Remove(&ws[7].slot) // twice is fine
		assert.False(t, ws[7].slot.Queued())
		checkHeap(t, q)
		assert.Equal(t, 49, q.Len())
		time.Sleep(time.Second) // synctest's clock: the timer fires every entry
		synctest.Wait()
		want := []int{40}
		for i := range 50 {
			if i != 7 && i != 40 {
				want = append(want, i)
			}
		}
		mu.Lock()
		assert.Equal(t, want, fired)
		mu.Unlock()
		assert.Zero(t, q.Len())
		for _, w := range ws {
			assert.False(t, w.slot.Queued())
		}
	})
}

// A wake callback may re-enter its waiter (a deadline that moved on), and
// a closed queue never fires again.
func TestQueueReenterAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q *Queue[*waiter]
		var fired []int64
		w := &waiter{}
		q = New(func(w *waiter, at, now int64) {
			fired = append(fired, at)
			if len(fired) < 3 {
				q.Add(at+int64(time.Second), &w.slot, w)
			}
		})
		start := q.Now()
		q.Add(start+int64(time.Second), &w.slot, w)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, []int64{start + 1e9, start + 2e9, start + 3e9}, fired)
		q.Add(q.Now()+int64(time.Second), &w.slot, w)
		q.Close()
		assert.True(t, q.Closed())
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Len(t, fired, 3, "nothing fires after Close")
		assert.Equal(t, 1, q.Len())
	})
}

// Random adds and removes keep the heap and the slots consistent.
func TestQueueHeapInvariant(t *testing.T) {
	q := New(func(*waiter, int64, int64) {})
	defer q.Close()
	ws := make([]*waiter, 200)
	for i := range ws {
		ws[i] = &waiter{name: i}
	}
	far := q.Now() + int64(time.Hour)
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		w := ws[r.IntN(len(ws))]
		if r.IntN(3) == 0 {
			q.Remove(&w.slot)
		} else {
			q.Add(far+r.Int64N(1e9), &w.slot, w)
		}
	}
	checkHeap(t, q)
	n := 0
	for _, w := range ws {
		if w.slot.Queued() {
			n++
		}
	}
	assert.Equal(t, n, q.Len())
	q.mu.Lock()
	ats := make([]int64, 0, len(q.h))
	for _, e := range q.h {
		ats = append(ats, e.at)
	}
	q.mu.Unlock()
	assert.Equal(t, slices.Min(ats), ats[0])
}

// At puts an instant on the queue's clock (Now): exactly, within a bubble;
// an instant before New is 1 (past, never the 0 callers use for none), one
// beyond the int64 range the largest.
func TestQueueAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(func(*waiter, int64, int64) {})
		defer q.Close()
		time.Sleep(time.Minute)
		now := q.Now()
		assert.Equal(t, int64(time.Minute)+1, now, "ns since New, plus one")
		assert.Equal(t, now+int64(time.Second), q.At(time.Now().Add(time.Second)))
		assert.Equal(t, now-int64(time.Second), q.At(time.Now().Add(-time.Second)))
		assert.Equal(t, int64(1), q.At(time.Now().Add(-time.Hour)))
		assert.Equal(t, int64(1), q.At(time.Time{}))
		assert.Equal(t, int64(1), q.At(time.Unix(1, 0)), "an instant before the queue was made, without a monotonic reading")
		assert.Equal(t, int64(math.MaxInt64), q.At(time.Unix(1<<62, 0)))
	})
}
