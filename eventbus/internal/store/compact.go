package store

import (
	"sort"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/replay"
)

// Merger is the rule set a compacting log folds records by (package
// eventbus adapts its Coalescer, whose rule sets live in package
// coalesce). The log calls it under the lock that guards the session.
type Merger interface {
	// Key returns r's merge key, "" when r never folds.
	Key(r *queue.Record) string
	// Merge returns the payload of the one record that replaces parts (two
	// or more consecutive records of one session, type, origin and key,
	// oldest first); last is the newest of them as published. Merge must
	// be a fold: merging a merged payload with further parts gives what
	// merging all the parts gives. On an error the parts are replayed one
	// by one.
	Merge(key string, last *queue.Record, parts []Part) ([]byte, error)
}

// Part is one published record folded into a compacted one: its id and
// payload (shared with the record as published, never copied). 32 bytes.
type Part struct {
	ID   uint64
	Data []byte
}

// A compacted record holds at most this many parts or bytes of payload;
// the next part starts a new record (the bounds of a coalesced group in
// package eventbus).
const (
	MaxParts     = 4096
	MaxPartBytes = 1 << 20
)

// Options configure [New].
type Options struct {
	// Records is how many records the log holds (1 to 1,000,000); a
	// compacted record counts once.
	Records int
	// Merger, when set, folds an appended record into the newest one
	// held when both have the same non-empty key, type and origin.
	Merger Merger
	// Bytes, when above 0, bounds the payload bytes held: the oldest
	// records go until the rest fit, except the newest one (a record
	// larger than the bound is held alone); a record folds only while it
	// stays within the bound.
	Bytes int64
	// MaxAge, when above 0, bounds in Unix ns how old the newest event of
	// a record may be: older records go at the next Append or Expire.
	MaxAge int64
}

// New returns the Log of a bus's session: the plain ring of NewRing when
// o asks for nothing more than a record count, else a log that also
// compacts (o.Merger) and bounds bytes and age. Whatever bound binds first
// evicts the oldest records, and HighestEvicted reports them.
//
// A compacting log folds a record into the newest one it holds when they
// merge under o.Merger (same key, type and origin; nothing of the session
// in between, since the log is the session's): the slot keeps the newest
// record as published, the parts' ids and payloads, and counts once.
// AppendAfter hands a compacted slot out as one record with the newest
// id, Count and FirstID (queue.Ext) and the merged payload — or, for a
// cursor inside it, the merge of exactly the parts after the cursor, so a
// client that holds some of its parts gets the rest and nothing twice.
// The merged payload of a whole slot is kept once made, until the next
// fold. With a [TextMerger], a run that folds as text keeps its text and
// an 8-byte index entry per part instead of every part's payload, and the
// next record of the run is recognised by its bytes (the same payload
// outside the text) before the Merger's Key is asked.
func New(o Options) (Log[*queue.Record], error) {
	if o.Merger == nil && o.Bytes <= 0 && o.MaxAge <= 0 {
		b, err := replay.New(o.Records, queue.RecordID)
		if err != nil {
			return nil, err
		}
		return &typedRing{Buffer: b}, nil
	}
	b, err := replay.New(o.Records, slotID)
	if err != nil {
		return nil, err
	}
	l := &compactLog{buf: b, m: o.Merger, maxBytes: o.Bytes, maxAge: o.MaxAge, foldBytes: MaxPartBytes}
	l.tm, _ = o.Merger.(TextMerger)
	if l.maxBytes > 0 && l.maxBytes < MaxPartBytes {
		l.foldBytes = int(l.maxBytes)
	}
	return l, nil
}

// slot is one record of a compacting log: a single record, or several
// folded into one.
type slot struct {
	last  *queue.Record // the newest record as published (session, type, origin, id, time)
	key   string        // last's merge key, "" when it never folds
	parts []Part        // nil for a single record; ≥ 2 once folded, oldest first
	text  *textParts    // instead of parts, a TextMerger's text key's parts (nil until folded)
	// env is the newest part's envelope, once looked at (envDone; a
	// TextMerger's log only): with a literal, the next record that equals
	// it outside that literal folds without a call of Key. textKey: key
	// folds as text.
	env     envelope
	envDone bool
	textKey bool
	bytes   int // payload bytes of the parts (or of last), as published
	// whole is the merged record of the parts, once a reader merged them
	// all (outside the lock: atomic); it serves while its Count is the
	// number of parts, i.e. until the next fold.
	whole atomic.Pointer[queue.Record]
}

func slotID(s **slot) uint64 { return (*s).last.ID }

// count returns how many records s holds.
func (s *slot) count() int {
	switch {
	case s.text != nil:
		return len(s.text.idx)
	case s.parts != nil:
		return len(s.parts)
	}
	return 1
}

// partID returns the id of s's part i.
func (s *slot) partID(i int) uint64 {
	if s.text != nil {
		return s.text.id(i)
	}
	return s.parts[i].ID
}

// compactLog is the Log of New with a Merger or a byte or age bound.
type compactLog struct {
	buf       *replay.Buffer[*slot]
	m         Merger     // nil: nothing folds
	tm        TextMerger // m, when it is one
	maxBytes  int64      // 0: no byte bound
	maxAge    int64      // ns; 0: no age bound
	foldBytes int        // the most payload one folded record holds
	bytes     int64      // payload bytes held
	ev        evictions
}

func (l *compactLog) Append(r *queue.Record) {
	defer l.evict(r.Nanos)
	l.bytes += int64(len(r.Data))
	var s *slot
	if l.buf.Len() > 0 {
		s = l.buf.At(l.buf.Len() - 1)
		if s.key == "" || s.last.Type != r.Type || s.last.Origin() != r.Origin() || r.Ext != nil && r.Ext.Media != 0 {
			s = nil // r cannot fold into it (a byte payload never folds: Key gives it no key)
		}
	}
	if s != nil && l.tm != nil {
		l.lookAt(s)
		if end, ok := sameEnvelope(&s.env, r.Data); ok { // r's key is s's (TextSpan's promise)
			if l.fits(s, r) {
				l.foldText(s, r, s.env.start, end, false)
				return
			}
			l.push(&slot{last: r, key: s.key, bytes: len(r.Data), envDone: true, textKey: true,
				env: envelope{data: r.Data, start: s.env.start, end: end}})
			return
		}
	}
	key := ""
	if l.m != nil {
		key = l.m.Key(r)
	}
	if s != nil && key == s.key && l.fits(s, r) {
		switch {
		case !s.textKey:
			if s.parts == nil {
				s.parts = append(make([]Part, 0, 4), Part{ID: s.last.ID, Data: s.last.Data})
			}
			s.parts = append(s.parts, Part{ID: r.ID, Data: r.Data})
			s.last = r
			s.bytes += len(r.Data)
			return
		default:
			if start, end, ok := l.tm.TextSpan(key, r); ok {
				l.foldText(s, r, start, end, true)
				return
			} // else (not text after all, against TextSpan's rule): a new record
		}
	}
	l.push(&slot{last: r, key: key, bytes: len(r.Data)})
}

// push appends s as a new record, evicting the oldest when the log is full.
func (l *compactLog) push(s *slot) {
	if old, dropped := l.buf.Append(s); dropped {
		l.bytes -= int64(old.bytes)
		l.ev.note(old.last.Type, old.last.ID)
	}
}

// fits reports whether r may fold into s: the part and byte bounds.
func (l *compactLog) fits(s *slot, r *queue.Record) bool {
	return s.count() < MaxParts && s.bytes+len(r.Data) <= l.foldBytes && (s.text == nil || s.text.fits(r))
}

// lookAt finds the envelope of s's newest part, once.
func (l *compactLog) lookAt(s *slot) {
	if s.envDone {
		return
	}
	s.envDone = true
	start, end, ok := l.tm.TextSpan(s.key, s.last)
	s.textKey = ok
	s.env = envelope{data: s.last.Data, start: -1}
	if ok {
		s.env.start, s.env.end = start, end
	}
}

// foldText folds r, whose literal is r.Data[start:end] (start < 0: none),
// into s, a text key's record; newEnv: r does not share s's envelope.
func (l *compactLog) foldText(s *slot, r *queue.Record, start, end int, newEnv bool) {
	if s.text == nil {
		s.text = &textParts{first: s.last.ID}
		s.text.add(s.last, s.env.start, s.env.end, true)
	}
	s.text.add(r, start, end, newEnv)
	if newEnv {
		s.env = envelope{data: r.Data, start: start, end: end}
	}
	s.last = r
	s.bytes += len(r.Data)
}

// evict drops the oldest records while the byte bound is exceeded (the
// newest stays) or their newest event is older than the age bound at now.
func (l *compactLog) evict(now int64) {
	for l.buf.Len() > 0 {
		s := l.buf.At(0)
		over := l.maxBytes > 0 && l.bytes > l.maxBytes && l.buf.Len() > 1
		old := l.maxAge > 0 && s.last.Nanos < now-l.maxAge
		if !over && !old {
			return
		}
		l.buf.DropOldest()
		l.bytes -= int64(s.bytes)
		l.ev.note(s.last.Type, s.last.ID)
	}
}

// Expire drops the records whose newest event is older than the age
// bound at now (Unix ns).
func (l *compactLog) Expire(now int64) {
	if l.maxAge > 0 {
		l.evict(now)
	}
}

func (l *compactLog) AppendAfter(dst []*queue.Record, cursor uint64) []*queue.Record {
	for i := l.buf.Search(cursor); i < l.buf.Len(); i++ {
		dst = l.view(dst, l.buf.At(i), cursor)
	}
	return dst
}

// view appends what s replays to a cursor: s as published, or the merge
// of its parts after the cursor (all of them when the cursor is before s).
// The merge is not made here, under the session's lock: the record
// appended carries a queue.Folded (Ext.Fold) that its reader merges after
// the lock is released, unless the merge of every part is at hand.
func (l *compactLog) view(dst []*queue.Record, s *slot, cursor uint64) []*queue.Record {
	n := s.count()
	if n == 1 {
		return append(dst, s.last)
	}
	k := sort.Search(n, func(i int) bool { return s.partID(i) > cursor })
	if k == n-1 {
		return append(dst, s.last) // only the newest part is missing
	}
	if w := s.whole.Load(); k == 0 && w != nil && int(w.Ext.Count) == n {
		return append(dst, w)
	}
	f := &fold{m: l.m, tm: l.tm, key: s.key, last: s.last, k: k}
	if s.text != nil {
		t := s.text.view() // a later fold never writes what this sees
		f.text = &t
	} else {
		f.parts = s.parts[k:n:n]
	}
	if k == 0 {
		f.whole = &s.whole
	}
	return append(dst, &queue.Record{ID: s.last.ID, Session: s.last.Session, Type: s.last.Type, Nanos: s.last.Nanos,
		Ext: &queue.Ext{Origin: s.last.Origin(), Count: int32(n - k), FirstID: s.partID(k), Fold: f}})
}

// fold is a queue.Folded: parts of one slot, merged when read.
type fold struct {
	m     Merger
	tm    TextMerger // text != nil only
	key   string
	last  *queue.Record
	parts []Part     // the parts to merge (parts form), or
	text  *textParts // the slot's text form, to merge from part k on
	k     int
	whole *atomic.Pointer[queue.Record] // the slot's cache, when parts are all of them
}

// Merge merges the parts with the rule set: one record with the newest
// id, Count and FirstID; or, when they do not merge, the parts one by one.
func (f *fold) Merge() []*queue.Record {
	last := f.last
	var data []byte
	var err error
	var n int
	var first uint64
	if f.text != nil {
		n, first = len(f.text.idx)-f.k, f.text.id(f.k)
		data, err = f.tm.JoinText(f.key, f.text.env(f.k).data, f.text.texts(f.k))
	} else {
		n, first = len(f.parts), f.parts[0].ID
		data, err = f.m.Merge(f.key, last, f.parts)
	}
	if err != nil || len(data) == 0 {
		out := make([]*queue.Record, 0, n)
		for i := range n - 1 {
			id, d := f.part(i)
			out = append(out, &queue.Record{ID: id, Session: last.Session, Type: last.Type, Data: d, Ext: last.Ext, Nanos: last.Nanos})
		}
		return append(out, last)
	}
	r := &queue.Record{ID: last.ID, Session: last.Session, Type: last.Type, Data: data, Nanos: last.Nanos,
		Ext: &queue.Ext{Origin: last.Origin(), Count: int32(n), FirstID: first}}
	if f.whole != nil {
		// Kept for the next reader unless a fold made a newer one first.
		if w := f.whole.Load(); w == nil || w.Ext.Count < r.Ext.Count {
			f.whole.CompareAndSwap(w, r)
		}
	}
	return []*queue.Record{r}
}

// part returns the id and payload of the i-th part f merges.
func (f *fold) part(i int) (uint64, []byte) {
	if f.text != nil {
		return f.text.id(f.k + i), f.text.payload(f.k + i)
	}
	return f.parts[i].ID, f.parts[i].Data
}

func (l *compactLog) CountAfter(cursor uint64) int { return l.buf.Len() - l.buf.Search(cursor) }

func (l *compactLog) Len() int { return l.buf.Len() }

func (l *compactLog) HighestEvicted() uint64 { return l.buf.HighestEvicted() }

func (l *compactLog) HighestEvictedOf(types []string) uint64 {
	if types == nil {
		return l.buf.HighestEvicted()
	}
	return l.ev.of(types)
}

func (l *compactLog) MarkEvicted(upTo uint64) {
	l.buf.MarkEvicted(upTo)
	l.ev.any = max(l.ev.any, upTo)
}

func (l *compactLog) Clear() {
	for i := range l.buf.Len() {
		s := l.buf.At(i)
		l.ev.note(s.last.Type, s.last.ID)
	}
	l.buf.Clear()
	l.bytes = 0
}
