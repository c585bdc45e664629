package store

import (
	"bytes"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
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

// concat folds records of type "d" by concatenating their payloads.
type concat struct{}

func (concat) Key(r *queue.Record) string {
	if r.Type == "d" {
		return "d"
	}
	return ""
}

func (concat) Merge(_ string, _ *queue.Record, parts []Part) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		out = append(out, p.Data...)
	}
	return out, nil
}

// The compacting Log: consecutive records with one key fold into one,
// which counts once; a cursor inside it gets exactly the parts after it.
func TestCompactLog(t *testing.T) {
	l, err := New(Options{Records: 2, Merger: concat{}})
	require.NoError(t, err)
	add := func(id uint64, typ, data string) { l.Append(&queue.Record{ID: id, Type: typ, Data: []byte(data)}) }
	add(1, "x", "-")
	add(2, "d", "a")
	add(3, "d", "b")
	add(4, "d", "c")
	assert.Equal(t, 2, l.Len(), "x, then abc")
	assert.Zero(t, l.HighestEvicted())
	view := func(cursor uint64) (out []string) {
		var rs []*queue.Record
		for _, r := range l.AppendAfter(nil, cursor) {
			if r.Ext != nil && r.Ext.Fold != nil {
				assert.Nil(t, r.Data, "merged by the reader, not under the lock")
				rs = append(rs, r.Ext.Fold.Merge()...)
				continue
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			s := string(r.Data) + "@" + strconv.FormatUint(r.ID, 10)
			if r.Ext != nil {
				s += "#" + strconv.Itoa(int(r.Ext.Count)) + "from" + strconv.FormatUint(r.Ext.FirstID, 10)
			}
			out = append(out, s)
		}
		return out
	}
	assert.Equal(t, []string{"-@1", "abc@4#3from2"}, view(0))
	assert.Equal(t, []string{"abc@4#3from2"}, view(1))
	assert.Equal(t, []string{"bc@4#2from3"}, view(2))
	assert.Equal(t, []string{"c@4"}, view(3), "one part left: the record as published")
	assert.Empty(t, view(4))
	assert.Equal(t, 1, l.CountAfter(2))
	add(5, "x", "+")
	assert.Equal(t, uint64(1), l.HighestEvicted(), "x was evicted, not a part")
	add(6, "x", "=")
	assert.Equal(t, uint64(4), l.HighestEvicted(), "the folded record goes as a whole")
	assert.Equal(t, []string{"+@5", "=@6"}, view(0))
}

// Byte and age bounds evict the oldest records and report them; the
// newest record stays even when it alone exceeds the byte bound.
func TestLogBounds(t *testing.T) {
	l, err := New(Options{Records: 100, Bytes: 4, MaxAge: 10})
	require.NoError(t, err)
	add := func(id uint64, data string, nanos int64) {
		l.Append(&queue.Record{ID: id, Type: "x", Data: []byte(data), Nanos: nanos})
	}
	add(1, "ab", 0)
	add(2, "cd", 1)
	assert.Equal(t, 2, l.Len())
	add(3, "e", 2)
	assert.Equal(t, 2, l.Len(), "5 bytes > 4: the oldest went")
	assert.Equal(t, uint64(1), l.HighestEvicted())
	add(4, "fghij", 3)
	assert.Equal(t, 1, l.Len(), "the newest stays alone")
	assert.Equal(t, uint64(3), l.HighestEvicted())
	l.Expire(13)
	assert.Equal(t, 1, l.Len(), "10 ns old: still held")
	l.Expire(14)
	assert.Zero(t, l.Len())
	assert.Equal(t, uint64(4), l.HighestEvicted())
	add(5, "k", 20)
	add(6, "l", 31)
	assert.Equal(t, 1, l.Len(), "an append evicts by age too")
	assert.Equal(t, uint64(5), l.HighestEvicted())
}

// failing never merges.
type failing struct{ concat }

func (failing) Merge(string, *queue.Record, []Part) ([]byte, error) { return nil, assert.AnError }

// Parts that do not merge replay one by one, each with its own id.
func TestCompactLogMergeFails(t *testing.T) {
	l, err := New(Options{Records: 2, Merger: failing{}})
	require.NoError(t, err)
	for id := uint64(1); id <= 3; id++ {
		l.Append(&queue.Record{ID: id, Type: "d", Data: []byte{byte('a' + id - 1)}})
	}
	got := l.AppendAfter(nil, 0)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Ext.Fold)
	var out []string
	for _, r := range got[0].Ext.Fold.Merge() {
		out = append(out, string(r.Data)+strconv.FormatUint(r.ID, 10))
	}
	assert.Equal(t, []string{"a1", "b2", "c3"}, out)
}

// texts folds records of type "d", payloads {"t":"…",…}, as text: their
// "t" strings concatenated, the rest of the first payload kept; fail
// makes every join fail.
type texts struct {
	concat
	fail bool
}

func (texts) TextSpan(_ string, r *queue.Record) (int, int, bool) {
	i := bytes.Index(r.Data, []byte(`"t":`))
	if i < 0 {
		return -1, -1, true
	}
	return i + 4, stringEnd(r.Data, i+4), true
}

func (m texts) JoinText(_ string, first []byte, ts iter.Seq[[]byte]) ([]byte, error) {
	if m.fail {
		return nil, assert.AnError
	}
	var all []byte
	for t := range ts {
		all = append(all, t...)
	}
	s, e, _ := m.TextSpan("", &queue.Record{Data: first})
	if s < 0 {
		return slices.Concat(all, []byte("|"), first), nil
	}
	return slices.Concat(first[:s+1], all, first[e-1:]), nil
}

// A TextMerger's run folds as text: the parts' literal contents and an
// index, one envelope per run of payloads equal outside the literal; a
// cursor inside it gets the join of exactly the parts after it, from the
// envelope of the first of them; when the join fails the parts replay one
// by one, their payloads rebuilt byte for byte.
func TestCompactLogTextForm(t *testing.T) {
	payloads := []string{`{"t":"a","n":1}`, `{"t":"b\"","n":1}`, `{"t":"c","n":2}`, `{"n":3}`, `{"t":"d","n":3}`, `{"t":"e","n":3}`}
	for _, fail := range []bool{false, true} {
		l, err := New(Options{Records: 2, Merger: texts{fail: fail}})
		require.NoError(t, err)
		for i, p := range payloads {
			l.Append(&queue.Record{ID: uint64(10 + 2*i), Type: "d", Data: []byte(p)})
		}
		require.Equal(t, 1, l.Len())
		s := l.(*compactLog).buf.At(0)
		require.NotNil(t, s.text, "text form")
		assert.Nil(t, s.parts)
		assert.Equal(t, `ab\"cde`, string(s.text.raw))
		assert.Equal(t, []int{0, 2, 3, 4}, []int{s.text.envs[0].at, s.text.envs[1].at, s.text.envs[2].at, s.text.envs[3].at},
			"a new envelope where the payload changes outside the text, and after a part without text")
		for k := range payloads {
			cursor := uint64(10 + 2*k - 1)
			got := l.AppendAfter(nil, cursor)
			require.Len(t, got, 1)
			if k == len(payloads)-1 {
				assert.Equal(t, payloads[k], string(got[0].Data), "one part left: as published")
				continue
			}
			f := got[0].Ext.Fold
			require.NotNil(t, f)
			assert.EqualValues(t, len(payloads)-k, got[0].Ext.Count)
			assert.Equal(t, uint64(10+2*k), got[0].Ext.FirstID)
			out := f.Merge()
			if !fail {
				require.Len(t, out, 1)
				env := []int{0, 0, 2, 3, 4}[k] // the part whose payload is k's envelope
				text := []string{`ab\"cde`, `b\"cde`, `cde`, `de`, `de`}[k]
				want := strings.Replace(payloads[env], `"t":"`+[]string{"a", "", "c", "", "d"}[env]+`"`, `"t":"`+text+`"`, 1)
				if env == 3 {
					want = text + "|" + payloads[3]
				}
				assert.Equal(t, want, string(out[0].Data), "from part %d", k)
				continue
			}
			require.Len(t, out, len(payloads)-k)
			for i, r := range out {
				assert.Equal(t, payloads[k+i], string(r.Data), "part %d rebuilt", k+i)
				assert.Equal(t, uint64(10+2*(k+i)), r.ID)
			}
		}
	}
}
