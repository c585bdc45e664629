package replay

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// ev is the test entry: an id and a name ("ev<n>").
type ev struct {
	id   uint64
	name string
}

func evID(e *ev) uint64 { return e.id }

// mk returns ev{id: i+1, name: "ev<i>"}: ids start at 1 like the bus's.
func mk(i int) ev { return ev{id: uint64(i + 1), name: fmt.Sprintf("ev%d", i)} }

// names returns the names of evs.
func names(evs []ev) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.name
	}
	return out
}

// span returns "ev<from>" … "ev<to-1>".
func span(from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("ev%d", i))
	}
	return out
}

// filled returns a buffer of the given capacity after appending mk(0) …
// mk(n-1).
func filled(t testing.TB, capacity, n int) *Buffer[ev] {
	t.Helper()
	b, err := New(capacity, evID)
	require.NoError(t, err)
	for i := range n {
		b.Append(mk(i))
	}
	return b
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		capacity int
		wantErr  string
	}{
		{capacity: 0, wantErr: "replay: capacity 0 out of range [1, 1000000]"},
		{capacity: -1, wantErr: "replay: capacity -1 out of range [1, 1000000]"},
		{capacity: 1_000_001, wantErr: "replay: capacity 1000001 out of range [1, 1000000]"},
		{capacity: 1},
		{capacity: 100},
		{capacity: MaxCapacity},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.capacity), func(t *testing.T) {
			t.Parallel()
			b, err := New[ev](tt.capacity, evID)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.Nil(t, b)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.capacity, b.Cap())
			assert.Zero(t, b.Len())
			assert.Empty(t, b.Replay(0))
			assert.Zero(t, len(b.items), "no slots reserved up front")
		})
	}
}

func TestAppendKeepsNewest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		capacity, n int
		want        []string
	}{
		{capacity: 100, n: 150, want: span(50, 150)},
		{capacity: 10, n: 15, want: span(5, 15)},
		{capacity: 10, n: 10, want: span(0, 10)},
		{capacity: 10, n: 3, want: span(0, 3)},
		{capacity: 10, n: 0, want: []string{}},
		{capacity: 1, n: 1, want: []string{"ev0"}},
		{capacity: 1, n: 7, want: []string{"ev6"}},
		{capacity: 3, n: 1000, want: span(997, 1000)},
		{capacity: 5, n: 9, want: span(4, 9)}, // capacity below the first growth step
		{capacity: 6, n: 13, want: span(7, 13)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("cap%d_n%d", tt.capacity, tt.n), func(t *testing.T) {
			t.Parallel()
			b, err := New(tt.capacity, evID)
			require.NoError(t, err)
			for i := range tt.n {
				old, dropped := b.Append(mk(i))
				if i < tt.capacity {
					assert.False(t, dropped, "append %d", i)
					assert.Zero(t, old)
				} else {
					assert.True(t, dropped, "append %d", i)
					assert.Equal(t, mk(i-tt.capacity), old, "append %d drops the oldest", i)
				}
				assert.LessOrEqual(t, len(b.items), tt.capacity, "backing array never exceeds Cap")
			}
			assert.Equal(t, tt.want, names(b.Replay(0)))
			assert.Equal(t, len(tt.want), b.Len())
			assert.Equal(t, tt.capacity, b.Cap())
			for i, w := range tt.want {
				assert.Equal(t, w, b.At(i).name)
			}
		})
	}
}

func TestReplayLimit(t *testing.T) {
	t.Parallel()
	b := filled(t, 10, 15) // holds ev5 … ev14
	tests := []struct {
		limit int
		want  []string
	}{
		{limit: 3, want: []string{"ev12", "ev13", "ev14"}},
		{limit: 1, want: []string{"ev14"}},
		{limit: 9, want: span(6, 15)},
		{limit: 10, want: span(5, 15)},
		{limit: 11, want: span(5, 15)},
		{limit: 0, want: span(5, 15)},
		{limit: -1, want: span(5, 15)},
		{limit: 1000, want: span(5, 15)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, names(b.Replay(tt.limit)))
		})
	}
}

// adr:1_buffer_bounds — docs/adr/eventbus-replay.md of AgentPool ("append
// 150 events to a buffer of size 100, verify only the last 100 are
// replayed"), through its ReplayBuffer.replay(limit), which returns
// events[-limit:]. The rows give each limit Python's answer; the one
// deviation is a negative limit: Python's slice drops the first -limit
// entries (replay(limit=-2) is events[2:]), Replay treats every limit ≤ 0 as
// "no limit" (docs/python-parity.md). The Go twin of replay(limit=-k) is
// Replay(Len()-k).
func TestADRBufferBoundsReplayLimit(t *testing.T) {
	t.Parallel()
	b := filled(t, 100, 150) // holds ev50 … ev149
	for _, tt := range []struct {
		python string
		got    []ev
		want   []string
	}{
		{"replay()", b.Replay(0), span(50, 150)},
		{"replay(limit=100)", b.Replay(100), span(50, 150)},
		{"replay(limit=150)", b.Replay(150), span(50, 150)},
		{"replay(limit=3)", b.Replay(3), span(147, 150)},
		{"replay(limit=0)", b.Replay(0), span(50, 150)}, // events[-0:] is events[0:]
		// Deviation: Python gives events[2:] (ev52 … ev149).
		{"replay(limit=-2) deviation", b.Replay(-2), span(50, 150)},
		{"replay(limit=-2) twin", dropOldest(b, 2), span(52, 150)},
		// Issue 27.8: the bare Replay(b.Len()-k) recipe, for k ≥ Len, asks
		// for a limit ≤ 0 and gets everything; Python's events[k:] is empty.
		{"replay(limit=-100) trap", b.Replay(b.Len() - 100), span(50, 150)},
		{"replay(limit=-100) twin", dropOldest(b, 100), []string{}},
		{"replay(limit=-120) twin", dropOldest(b, 120), []string{}},
		{"replay(limit=-99) twin", dropOldest(b, 99), span(149, 150)},
	} {
		t.Run(tt.python, func(t *testing.T) {
			assert.Equal(t, tt.want, names(tt.got))
		})
	}
}

// dropOldest is the porting recipe for AgentPool's replay(limit=-k),
// Python's events[k:]: every entry but the k oldest, none when k ≥ Len
// (docs/python-parity.md).
func dropOldest[T any](b *Buffer[T], k int) []T {
	if n := b.Len() - k; n > 0 {
		return b.Replay(n)
	}
	return nil
}

func TestReplayEdgeCases(t *testing.T) {
	t.Parallel()
	t.Run("empty buffer returns an empty non-nil slice", func(t *testing.T) {
		t.Parallel()
		b := filled(t, 10, 0)
		for _, limit := range []int{-1, 0, 1, 10} {
			got := b.Replay(limit)
			assert.NotNil(t, got)
			assert.Empty(t, got)
		}
	})
	t.Run("result is a copy", func(t *testing.T) {
		t.Parallel()
		b := filled(t, 4, 6)
		got := b.Replay(0)
		got[0].name = "changed"
		assert.Equal(t, span(2, 6), names(b.Replay(0)))
	})
	t.Run("capacity 1", func(t *testing.T) {
		t.Parallel()
		b := filled(t, 1, 3)
		assert.Equal(t, []string{"ev2"}, names(b.Replay(0)))
		assert.Equal(t, []string{"ev2"}, names(b.Replay(1)))
		assert.Equal(t, []string{"ev2"}, names(b.Replay(5)))
	})
}

func TestAtPanicsOutOfRange(t *testing.T) {
	t.Parallel()
	b := filled(t, 4, 6)
	assert.Equal(t, "ev2", b.At(0).name)
	assert.Equal(t, "ev5", b.At(3).name)
	assert.PanicsWithValue(t, "replay: index 4 out of range [0, 4)", func() { b.At(4) })
	assert.PanicsWithValue(t, "replay: index -1 out of range [0, 4)", func() { b.At(-1) })
}

func TestIDs(t *testing.T) {
	t.Parallel()
	type ids struct{ first, last, evicted uint64 }
	get := func(b *Buffer[ev]) ids { return ids{b.FirstID(), b.LastID(), b.HighestEvicted()} }

	b, err := New(10, evID)
	require.NoError(t, err)
	steps := []struct {
		name string
		do   func()
		want ids
	}{
		{"empty", func() {}, ids{0, 0, 0}},
		{"5 appended", func() { appendIDs(b, 1, 5) }, ids{1, 5, 0}},
		{"full", func() { appendIDs(b, 6, 10) }, ids{1, 10, 0}},
		{"one wrap", func() { appendIDs(b, 11, 11) }, ids{2, 11, 1}},
		{"15 appended", func() { appendIDs(b, 12, 15) }, ids{6, 15, 5}},
		{"two full wraps", func() { appendIDs(b, 16, 35) }, ids{26, 35, 25}},
		{"cleared", b.Clear, ids{0, 0, 35}},
		{"cleared again", b.Clear, ids{0, 0, 35}},
		{"append after clear", func() { appendIDs(b, 36, 36) }, ids{36, 36, 35}},
		{"refill and wrap after clear", func() { appendIDs(b, 37, 50) }, ids{41, 50, 40}},
		{"gaps in ids", func() { b.Append(ev{id: 60}); b.Append(ev{id: 70}) }, ids{43, 70, 42}},
		{"MarkEvicted below is a no-op", func() { b.MarkEvicted(10) }, ids{43, 70, 42}},
		{"MarkEvicted above raises", func() { b.MarkEvicted(100) }, ids{43, 70, 100}},
		{"clear keeps the higher mark", b.Clear, ids{0, 0, 100}},
	}
	for _, s := range steps {
		s.do()
		assert.Equal(t, s.want, get(b), s.name)
		assert.LessOrEqual(t, b.Len(), b.Cap(), s.name)
	}
}

// appendIDs appends entries with ids from … to, inclusive.
func appendIDs(b *Buffer[ev], from, to uint64) {
	for id := from; id <= to; id++ {
		b.Append(ev{id: id, name: fmt.Sprintf("id%d", id)})
	}
}

func TestNoIDFunc(t *testing.T) {
	t.Parallel()
	b, err := New[string](3, nil)
	require.NoError(t, err)
	for _, s := range []string{"a", "b", "c", "d"} {
		b.Append(s)
	}
	assert.Equal(t, []string{"b", "c", "d"}, b.Replay(0))
	assert.Zero(t, b.FirstID())
	assert.Zero(t, b.LastID())
	assert.Zero(t, b.HighestEvicted())
	assert.Equal(t, 0, b.Search(100))
	assert.Equal(t, []string{"b", "c", "d"}, b.AppendAfter(nil, 100))
	b.Clear()
	assert.Zero(t, b.HighestEvicted())
	assert.Empty(t, b.Replay(0))
}

func TestAppendAfterAndSearch(t *testing.T) {
	t.Parallel()
	// Contiguous ids: capacity 10 after 20 appends holds ids 11 … 20.
	contiguous, err := New(10, evID)
	require.NoError(t, err)
	appendIDs(contiguous, 1, 20)
	// Gapped ids (one bus sequence shared by several sessions): 2, 4, … 30,
	// capacity 8 holds 16 … 30.
	gapped, err := New(8, evID)
	require.NoError(t, err)
	for id := uint64(2); id <= 30; id += 2 {
		gapped.Append(ev{id: id})
	}
	idsOf := func(evs []ev) []uint64 {
		out := []uint64{}
		for _, e := range evs {
			out = append(out, e.id)
		}
		return out
	}
	seq := func(from, to, step uint64) []uint64 {
		out := []uint64{}
		for id := from; id <= to; id += step {
			out = append(out, id)
		}
		return out
	}
	tests := []struct {
		name       string
		b          *Buffer[ev]
		cursor     uint64
		wantIndex  int
		wantIDs    []uint64
		wantBefore bool // cursor is before the window: events were lost
	}{
		{"zero cursor", contiguous, 0, 0, seq(11, 20, 1), true},
		{"before the window", contiguous, 5, 0, seq(11, 20, 1), true},
		{"just before the window", contiguous, 10, 0, seq(11, 20, 1), false},
		{"at the oldest", contiguous, 11, 1, seq(12, 20, 1), false},
		{"inside", contiguous, 15, 5, seq(16, 20, 1), false},
		{"at the second newest", contiguous, 19, 9, []uint64{20}, false},
		{"at the newest", contiguous, 20, 10, []uint64{}, false},
		{"after the window", contiguous, 1000, 10, []uint64{}, false},
		{"gapped before the window", gapped, 3, 0, seq(16, 30, 2), true},
		{"gapped just before", gapped, 14, 0, seq(16, 30, 2), false},
		{"gapped in a hole", gapped, 17, 1, seq(18, 30, 2), false},
		{"gapped on an id", gapped, 22, 4, seq(24, 30, 2), false},
		{"gapped in the last hole", gapped, 29, 7, []uint64{30}, false},
		{"gapped at the newest", gapped, 30, 8, []uint64{}, false},
		{"gapped after", gapped, 31, 8, []uint64{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.wantIndex, tt.b.Search(tt.cursor))
			assert.Equal(t, tt.wantIDs, idsOf(tt.b.AppendAfter(nil, tt.cursor)))
			assert.Equal(t, tt.wantBefore, tt.cursor < tt.b.HighestEvicted(),
				"HighestEvicted tells whether the cursor lost events")
		})
	}
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestAppendAfterKeepsDst(t *testing.T) {
	b := filled(t, 10, 15) // ids 6 … 15
	dst := []ev{{id: 1, name: "mine"}}
	got := b.AppendAfter(dst, 13)
	assert.Equal(t, []string{"mine", "ev13", "ev14"}, names(got))

	buf := make([]ev, 0, 10)
	allocs := testing.AllocsPerRun(100, func() { buf = b.AppendAfter(buf[:0], 0) })
	assert.Zero(t, allocs, "no allocation when dst is large enough")
	assert.Equal(t, span(5, 15), names(buf))
}

func TestGrowthNeverExceedsCap(t *testing.T) {
	t.Parallel()
	for _, capacity := range []int{1, 2, 3, 4, 5, 7, 8, 9, 100, 1000} {
		t.Run(fmt.Sprint(capacity), func(t *testing.T) {
			t.Parallel()
			b, err := New(capacity, evID)
			require.NoError(t, err)
			prev := 0
			for i := range 3*capacity + 2 { // wrap the ring more than twice
				b.Append(mk(i))
				got := len(b.items)
				require.LessOrEqual(t, got, capacity, "append %d", i)
				require.GreaterOrEqual(t, got, b.Len(), "append %d", i)
				require.GreaterOrEqual(t, got, prev, "the backing array never shrinks while in use")
				if got != prev && prev != 0 {
					assert.True(t, got == 2*prev || got == capacity, "grows by doubling up to the capacity: %d → %d", prev, got)
				}
				prev = got
			}
			assert.Equal(t, capacity, len(b.items), "a full ring uses exactly Cap slots")
			b.Clear()
			assert.Nil(t, b.items, "Clear releases the backing array")
			assert.Equal(t, capacity, b.Cap())
		})
	}
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestAppendFullDoesNotAllocate(t *testing.T) {
	b := filled(t, 100, 100)
	e := mk(1000)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { b.Append(e) }))
}

// TestBufferModel compares a Buffer with a plain slice under random
// Append, Clear, Replay, AppendAfter, Search and MarkEvicted calls.
func TestBufferModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 40).Draw(t, "capacity")
		b, err := New(capacity, evID)
		if err != nil {
			t.Fatal(err)
		}
		var model []ev // oldest first, at most capacity
		var evicted, nextID uint64
		t.Repeat(map[string]func(*rapid.T){
			"Append": func(t *rapid.T) {
				nextID += rapid.Uint64Range(1, 3).Draw(t, "gap")
				e := ev{id: nextID, name: fmt.Sprint(nextID)}
				old, dropped := b.Append(e)
				model = append(model, e)
				if len(model) > capacity {
					if !dropped || old != model[0] {
						t.Fatalf("Append dropped %v %v, model drops %v", old, dropped, model[0])
					}
					evicted = max(evicted, model[0].id)
					model = model[1:]
				} else if dropped {
					t.Fatalf("Append dropped %v below capacity", old)
				}
			},
			"Clear": func(t *rapid.T) {
				b.Clear()
				if len(model) > 0 {
					evicted = max(evicted, model[len(model)-1].id)
				}
				model = nil
			},
			"Replay": func(t *rapid.T) {
				limit := rapid.IntRange(-2, capacity+2).Draw(t, "limit")
				want := model
				if limit > 0 && limit < len(model) {
					want = model[len(model)-limit:]
				}
				if got := b.Replay(limit); !equal(got, want) {
					t.Fatalf("Replay(%d) = %v, want %v", limit, got, want)
				}
			},
			"AppendAfter": func(t *rapid.T) {
				cursor := rapid.Uint64Range(0, nextID+2).Draw(t, "cursor")
				want := []ev{}
				idx := len(model)
				for i, e := range model {
					if e.id > cursor {
						want = append(want, e)
						idx = min(idx, i)
					}
				}
				if got := b.AppendAfter(nil, cursor); !equal(got, want) {
					t.Fatalf("AppendAfter(%d) = %v, want %v", cursor, got, want)
				}
				if got := b.Search(cursor); got != idx {
					t.Fatalf("Search(%d) = %d, want %d", cursor, got, idx)
				}
			},
			"MarkEvicted": func(t *rapid.T) {
				upTo := rapid.Uint64Range(0, nextID).Draw(t, "upTo")
				b.MarkEvicted(upTo)
				evicted = max(evicted, upTo)
			},
			"": func(t *rapid.T) { // invariants, checked after every step
				if b.Len() != len(model) || b.Cap() != capacity {
					t.Fatalf("Len %d Cap %d, model %d/%d", b.Len(), b.Cap(), len(model), capacity)
				}
				if len(b.items) > capacity {
					t.Fatalf("backing array %d > capacity %d", len(b.items), capacity)
				}
				var first, last uint64
				if len(model) > 0 {
					first, last = model[0].id, model[len(model)-1].id
				}
				if b.FirstID() != first || b.LastID() != last || b.HighestEvicted() != evicted {
					t.Fatalf("ids %d/%d/%d, model %d/%d/%d",
						b.FirstID(), b.LastID(), b.HighestEvicted(), first, last, evicted)
				}
				for i, e := range model {
					if b.At(i) != e {
						t.Fatalf("At(%d) = %v, want %v", i, b.At(i), e)
					}
				}
			},
		})
	})
}

func equal(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("full_%d", size), func(b *testing.B) {
			buf := filled(b, size, size)
			e := mk(size)
			b.ReportAllocs()
			for b.Loop() {
				e.id++
				buf.Append(e)
			}
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		buf := filled(b, size, size+size/2) // full and wrapped
		b.Run(fmt.Sprintf("all_%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = buf.Replay(0)
			}
		})
		b.Run(fmt.Sprintf("after_half_%d", size), func(b *testing.B) {
			cursor := buf.At(size / 2).id
			dst := make([]ev, 0, size)
			b.ReportAllocs()
			for b.Loop() {
				dst = buf.AppendAfter(dst[:0], cursor)
			}
		})
	}
}

func TestDropOldest(t *testing.T) {
	b := filled(t, 3, 5) // holds ev2 ev3 ev4, ids 3–5
	b.DropOldest()
	assert.Equal(t, span(3, 5), names(b.Replay(0)))
	assert.Equal(t, uint64(3), b.HighestEvicted())
	b.Append(mk(5))
	assert.Equal(t, span(3, 6), names(b.Replay(0)))
	b.DropOldest()
	b.DropOldest()
	b.DropOldest()
	b.DropOldest() // empty: nothing happens
	assert.Zero(t, b.Len())
	assert.Equal(t, uint64(6), b.HighestEvicted())
}
