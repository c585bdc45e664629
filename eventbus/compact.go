package eventbus

import (
	"encoding/json"
	"iter"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
)

// compactor is a Coalescer seen by a compacting session log (package
// internal/store): the same rule set, keys and merges a coalescing
// subscription uses, applied to what the log keeps instead of to what one
// subscriber reads.
type compactor struct{ c Coalescer }

// Key returns r's merge key; session_closed and a byte payload (not JSON:
// the rule sets merge JSON) never fold, and an event the rule set would
// drop is kept as published (live delivery is unchanged, so the log keeps
// what was delivered).
func (m compactor) Key(r *record) string {
	if r.Type == frame.TypeSessionClosed || mediaOf(r) != 0 {
		return ""
	}
	var ev Event
	fillEvent(&ev, r, false)
	key, drop := m.c.Key(ev)
	if drop {
		return ""
	}
	return key
}

// Merge merges parts, which share last's session, type and origin, with
// the rule set's Merge.
func (m compactor) Merge(key string, last *record, parts []store.Part) ([]byte, error) {
	evs := make([]Event, len(parts))
	for i, p := range parts {
		fillEvent(&evs[i], last, true)
		evs[i].ID, evs[i].Data = p.ID, p.Data
	}
	return m.c.Merge(key, evs)
}

// textCoalescer is a [Coalescer] some of whose merges concatenate the text
// of one JSON string per event, the rest of the payload being the first
// event's (a streamed reply's deltas: coalesce's Concat rules). A
// compacting bus
// ([Options.ReplayCompact]) with a rule set that has these two methods stores such a run as its
// text, an index of 8 bytes per event and the payloads that differ
// outside the text, not every event's payload; and it recognises the next
// event of the run by its bytes, without calling Key. Replays are the
// same as with Merge. Like a Coalescer, it must be safe for concurrent
// use, must not block, panic or modify the data it is given.
type textCoalescer interface {
	Coalescer
	// TextSpan returns where, in data (the payload of an event of type typ
	// whose merge key is key), the JSON string literal key's merge
	// concatenates lies: data[start:end], quotes included; start < 0 when
	// the event holds no text there (null or absent, merged as ""). ok is
	// false when key does not merge as text. ok true promises that any
	// event of type typ whose payload equals data outside [start, end) and
	// holds a JSON string literal there has merge key key (whatever else
	// differs: its id, time or origin), and that literal's text is its
	// part of the merge.
	TextSpan(key, typ string, data []byte) (start, end int, ok bool)
	// JoinText returns what Merge returns for events of key whose first
	// event's payload equals first outside its literal, given the contents
	// of the events' literals (between the quotes, escapes as published),
	// oldest first.
	JoinText(key string, first []byte, texts iter.Seq[[]byte]) (json.RawMessage, error)
}

// textCompactor is a compactor whose rule set is a textCoalescer.
type textCompactor struct {
	compactor
	t textCoalescer
}

// TextSpan is the rule set's, for r's payload.
func (m textCompactor) TextSpan(key string, r *record) (int, int, bool) {
	return m.t.TextSpan(key, r.Type, r.Data)
}

// JoinText is the rule set's.
func (m textCompactor) JoinText(key string, first []byte, texts iter.Seq[[]byte]) ([]byte, error) {
	return m.t.JoinText(key, first, texts)
}

// logOptions are each session's log as cfg asks: the record count, the
// byte and age bounds, the compaction rule set.
func logOptions(cfg Options) store.Options {
	o := store.Options{Records: cfg.ReplayBufferSize, Bytes: cfg.ReplayMaxBytes, MaxAge: int64(cfg.ReplayMaxAge)}
	if c := cfg.ReplayCompact; c != nil {
		o.Merger = compactor{c}
		if t, ok := c.(textCoalescer); ok {
			o.Merger = textCompactor{compactor{c}, t}
		}
	}
	return o
}

// mergeFolds replaces every record of snap that a compacting log handed
// out unmerged (Ext.Fold) by the records it merges into, in place when
// each merges into one. It runs after the lock of the snapshot is
// released (finishSnapshot): a merge reads every part of a folded record.
func mergeFolds(snap []*record) []*record {
	for i, r := range snap {
		if r.Ext == nil || r.Ext.Fold == nil {
			continue
		}
		m := r.Ext.Fold.Merge()
		if len(m) == 1 {
			snap[i] = m[0]
			continue
		}
		// The parts did not merge: they replay one by one.
		out := make([]*record, 0, len(snap)+len(m))
		out = append(append(out, snap[:i]...), m...)
		return append(out, mergeFolds(snap[i+1:])...)
	}
	return snap
}
