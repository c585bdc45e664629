package eventbus

import (
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

// newLog returns a new session's log as the bus's options ask: the
// record count, the byte and age bounds, the compaction rule set.
func (b *Bus) newLog() (store.Log[*record], error) {
	o := store.Options{Records: b.cfg.ReplayBufferSize, Bytes: b.cfg.ReplayMaxBytes, MaxAge: int64(b.cfg.ReplayMaxAge)}
	if b.cfg.ReplayCompact != nil {
		o.Merger = compactor{b.cfg.ReplayCompact}
	}
	return store.New(o)
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
