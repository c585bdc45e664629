package store

import (
	"bytes"
	"iter"
	"math"
	"sort"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// TextMerger is a Merger some of whose keys fold by concatenating the
// text of one JSON string per record (a streamed reply's deltas). A
// compacting log keeps a run of such a key as its text form: the
// contents of each part's string literal, one after the other, an index
// of 8 bytes per part (its id and where its text ends, as uint32s) and,
// for each run of parts whose payloads differ only in that literal, the
// first one's payload (the envelope) — instead of every part's payload.
// It also recognises the next record of such a run by comparing its bytes
// with the envelope, without calling Key (never a record with a media
// type, Ext.Media: a byte payload, which no rule set folds).
type TextMerger interface {
	Merger
	// TextSpan returns where, in the payload of r (whose key is key), the
	// JSON string literal key's merge concatenates lies: r.Data[start:end],
	// quotes included; start < 0 when r holds no text there (null or
	// absent: it adds ""). ok is false when key does not fold as text,
	// and then the log keeps the parts' payloads. ok true promises: any
	// payload of r's type and origin that equals r.Data outside
	// [start, end) and holds a JSON string literal there has key key, and
	// its text is that literal's.
	TextSpan(key string, r *queue.Record) (start, end int, ok bool)
	// JoinText returns what Merge returns for records of key whose first
	// one's payload equals first outside its literal, given the contents
	// of their literals (between the quotes, escapes as published), oldest
	// first. An error replays the records one by one.
	JoinText(key string, first []byte, texts iter.Seq[[]byte]) ([]byte, error)
}

// envelope is a payload the parts of a text fold after it share, outside
// their literal.
type envelope struct {
	at         int    // the index of the part whose payload it is
	data       []byte // that part's payload as published (shared)
	start, end int    // data[start:end] is its literal; start < 0: none
}

// textParts is the text form of a slot's parts (see TextMerger).
type textParts struct {
	first uint64
	idx   []partIndex // one per part, oldest first
	raw   []byte      // the parts' literal contents, concatenated
	envs  []envelope  // by at, ascending; envs[0].at == 0
}

// partIndex is a text part's entry in the index: 8 bytes.
type partIndex struct {
	id  uint32 // the part's id - textParts.first
	end uint32 // where its contents end in raw
}

// grow returns s with room for n more elements, doubling its capacity
// (at least min) when it has to: the copies a fold makes stay under one
// per element.
func grow[T any](s []T, n, least int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	out := make([]T, len(s), max(least, 2*cap(s), len(s)+n))
	copy(out, s)
	return out
}

// add appends part r, whose literal is r.Data[start:end] (start < 0:
// none); newEnv starts an envelope with r's payload.
func (t *textParts) add(r *queue.Record, start, end int, newEnv bool) {
	if newEnv {
		t.envs = append(t.envs, envelope{at: len(t.idx), data: r.Data, start: start, end: end})
	}
	if start >= 0 {
		lit := r.Data[start+1 : end-1]
		t.raw = append(grow(t.raw, len(lit), 256), lit...)
	}
	t.idx = append(grow(t.idx, 1, 32), partIndex{id: uint32(r.ID - t.first), end: uint32(len(t.raw))})
}

// fits reports whether r's id can be indexed (within 2^32 of the first).
func (t *textParts) fits(r *queue.Record) bool { return r.ID-t.first <= math.MaxUint32 }

func (t *textParts) id(i int) uint64 { return t.first + uint64(t.idx[i].id) }

// view returns the parts' index as it is now: a later add never writes
// what it holds.
func (t *textParts) view() textParts {
	return textParts{first: t.first, idx: t.idx[:len(t.idx):len(t.idx)], raw: t.raw[:len(t.raw):len(t.raw)],
		envs: t.envs[:len(t.envs):len(t.envs)]}
}

// text returns the contents of part i's literal.
func (t *textParts) text(i int) []byte {
	from := uint32(0)
	if i > 0 {
		from = t.idx[i-1].end
	}
	return t.raw[from:t.idx[i].end]
}

// env returns the envelope of part i.
func (t *textParts) env(i int) envelope {
	k := sort.Search(len(t.envs), func(j int) bool { return t.envs[j].at > i })
	return t.envs[k-1]
}

// payload returns part i's payload as published: its envelope with its
// own literal contents.
func (t *textParts) payload(i int) []byte {
	e := t.env(i)
	if e.at == i {
		return e.data
	}
	txt := t.text(i)
	out := make([]byte, 0, len(e.data)-(e.end-e.start)+len(txt)+2)
	out = append(out, e.data[:e.start+1]...)
	out = append(out, txt...)
	return append(out, e.data[e.end-1:]...)
}

// texts yields the literal contents of parts k and after.
func (t *textParts) texts(k int) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := k; i < len(t.idx); i++ {
			if !yield(t.text(i)) {
				return
			}
		}
	}
}

// sameEnvelope reports whether p equals e's payload outside e's literal
// and holds one JSON string literal in its place (a literal is a quote,
// then anything up to the first quote no backslash escapes); end is
// where p's literal ends.
func sameEnvelope(e *envelope, p []byte) (end int, ok bool) {
	if e.start < 0 {
		return 0, false
	}
	tail := e.data[e.end:]
	end = len(p) - len(tail)
	if end < e.start+2 || p[e.start] != '"' || p[end-1] != '"' ||
		!bytes.Equal(p[:e.start], e.data[:e.start]) || !bytes.Equal(p[end:], tail) {
		return 0, false
	}
	return end, stringEnd(p, e.start) == end
}

// stringEnd returns the index just after the JSON string literal that
// starts at the quote p[i], or -1 when p ends first. It jumps from quote
// to quote and steps through escapes only in a run that has one.
func stringEnd(p []byte, i int) int {
	for i++; i < len(p); {
		j := bytes.IndexByte(p[i:], '"')
		if j < 0 {
			return -1
		}
		if bytes.IndexByte(p[i:i+j], '\\') < 0 {
			return i + j + 1
		}
		for ; i < len(p); i++ {
			switch p[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	}
	return -1
}
