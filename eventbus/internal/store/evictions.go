package store

import (
	"slices"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/replay"
)

// maxTypeMarks bounds how many event types a log remembers evictions of
// one by one; evictions of further types count for every type
// (announced to every filtered resume: conservative, never silent).
const maxTypeMarks = 64

// evictions is what a log of records dropped, per event type, so that a
// resume filtered by type is told of a loss only when events of its types
// were lost (langgraph#7778's bug is the opposite: a filter hiding, or
// inventing, a gap).
type evictions struct {
	any   uint64 // lost whatever the type: MarkEvicted, types beyond maxTypeMarks
	marks []typeMark
}

type typeMark struct {
	typ string
	id  uint64
}

// note records that the record of type typ with id id was dropped.
func (e *evictions) note(typ string, id uint64) {
	for i := range e.marks {
		if e.marks[i].typ == typ {
			e.marks[i].id = max(e.marks[i].id, id)
			return
		}
	}
	if len(e.marks) < maxTypeMarks {
		e.marks = append(e.marks, typeMark{typ, id})
		return
	}
	e.any = max(e.any, id)
}

// of returns the highest id lost among types.
func (e *evictions) of(types []string) uint64 {
	h := e.any
	for _, m := range e.marks {
		if m.id > h && slices.Contains(types, m.typ) {
			h = m.id
		}
	}
	return h
}

// typedRing is the Log of New for a record count alone: the ring of
// NewRing, remembering the types of what it drops.
type typedRing struct {
	*replay.Buffer[*queue.Record]
	ev evictions
}

func (r *typedRing) Append(v *queue.Record) {
	if old, dropped := r.Buffer.Append(v); dropped {
		r.ev.note(old.Type, old.ID)
	}
}

func (r *typedRing) CountAfter(cursor uint64) int { return r.Len() - r.Search(cursor) }

func (r *typedRing) HighestEvictedOf(types []string) uint64 {
	if types == nil {
		return r.HighestEvicted()
	}
	return r.ev.of(types)
}

func (r *typedRing) MarkEvicted(upTo uint64) {
	r.Buffer.MarkEvicted(upTo)
	r.ev.any = max(r.ev.any, upTo)
}

func (r *typedRing) Clear() {
	for i := range r.Len() {
		rec := r.At(i)
		r.ev.note(rec.Type, rec.ID)
	}
	r.Buffer.Clear()
}

func (r *typedRing) Expire(int64) {}
