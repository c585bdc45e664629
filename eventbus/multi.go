package eventbus

import (
	"maps"
	"slices"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/scope"
)

// A many-sessions subscription (SubscribeOptions.Sessions) is an "all"
// subscriber with a set: it sits in the "all" list, so that the ordering
// step hands it the ids of every tree in rising order, and offer passes it
// only the events of sessions its set covers. Its replay is planned per
// session of the set, each from its own position (the cursor, or its
// floor), and merged by id: one ordered stream, as for scope.All.

// sessionSet is the set of a many-sessions subscription. It is fixed at
// Subscribe; changing a set is subscribing again.
type sessionSet struct {
	kinds   map[string]scope.Kind // every session of the set, the named one included
	order   []string              // the set's ids, sorted: per-session frames come in this order
	floors  map[string]uint64     // positions other than the cursor's (SubscribeOptions.Floors)
	subtree []string              // the ids with scope.Subtree
	get     func(string) *session // the history's lookup, under the structure lock (either side)
}

// newSessionSet validates o's set around session id with scope k.
func newSessionSet(id string, k scope.Kind, o SubscribeOptions, get func(string) *session) (*sessionSet, error) {
	switch {
	case o.Snapshot, o.Client != "", o.Presence, o.StrictCursor:
		return nil, invalidf("Sessions with Snapshot, Client, Presence or StrictCursor")
	case len(o.Floors) > 0 && o.Cursor == nil:
		return nil, invalidf("Floors without Cursor")
	}
	ss := &sessionSet{kinds: make(map[string]scope.Kind, len(o.Sessions)+1), get: get}
	add := func(id string, k scope.Kind) error {
		if err := checkName("session id", id); err != nil {
			return err
		}
		if !k.Valid() || k == scope.All {
			return invalidf("scope %v of session %q in Sessions", k, id)
		}
		ss.kinds[id] = k
		return nil
	}
	if err := add(id, k); err != nil {
		return nil, err
	}
	for x, kx := range o.Sessions {
		if x == id {
			continue // the named session: its scope is Scope
		}
		if err := add(x, kx); err != nil {
			return nil, err
		}
	}
	for x := range o.Floors {
		if _, ok := ss.kinds[x]; !ok {
			return nil, invalidf("floor for session %q, which is not in the set", x)
		}
	}
	ss.floors = maps.Clone(o.Floors)
	ss.order = slices.Sorted(maps.Keys(ss.kinds))
	for _, x := range ss.order {
		if ss.kinds[x] == scope.Subtree {
			ss.subtree = append(ss.subtree, x)
		}
	}
	return ss, nil
}

// position is session id's position: its floor, else the cursor's id.
func (ss *sessionSet) position(id string, main uint64) uint64 {
	if f, ok := ss.floors[id]; ok {
		return f
	}
	return main
}

// covers reports whether an event of session x is in the set's scope.
// The caller holds the structure lock (either side) and x's tree lock.
func (ss *sessionSet) covers(x *session) bool {
	if _, ok := ss.kinds[x.ID]; ok {
		return true
	}
	p := x.Parent()
	for a := p; a != nil; a = a.Parent() {
		if k, ok := ss.kinds[a.ID]; ok && k == scope.Descendants {
			return true
		}
	}
	for _, id := range ss.subtree {
		// subtree of e: e, its parent and its siblings.
		e := ss.get(id)
		if e == nil {
			continue
		}
		if ep := e.Parent(); ep != nil && (ep == x || ep == p) {
			return true
		}
	}
	return false
}

// setRings are the logs of one session of a set, replayed after pos.
type setRings struct {
	rings []store.Log[*record]
	pos   uint64
}

// snapshotPlanSetLocked is snapshotPlanLocked for a many-sessions
// subscription: each session of s's set replays its scope's logs after its
// own position, and its losses are announced in frames naming it. The
// structure lock is held exclusively.
func (b *Bus) snapshotPlanSetLocked(s *Subscription, pos *Position, types []string) snapshotJob {
	ss := s.setOf()
	j := snapshotJob{now: b.nowNanos(), earliest: b.st.horizon(), hasCursor: pos != nil, set: true}
	var main uint64
	if pos != nil {
		main = pos.ID
		j.reset = (pos.Epoch != "" && pos.Epoch != b.epoch) || main >= j.earliest
	}
	j.cursor = ^uint64(0)
	for _, id := range ss.order {
		x := ss.get(id)
		was := ss.position(id, main)
		p := was
		if j.reset {
			p = 0
		}
		j.cursor = min(j.cursor, p)
		rings, lost := b.hist.ScopeLogs(x, ss.kinds[id], nil)
		ev := lost
		for _, r := range rings {
			r.Expire(j.now)
			j.total += r.CountAfter(p)
			ev = max(ev, r.HighestEvictedOf(types))
		}
		j.per = append(j.per, setRings{rings: rings, pos: p})
		j.nrings += len(rings)
		switch {
		case j.reset:
			j.lead = append(j.lead, synth(id, frame.TypeStateResyncRequired, frame.ResyncData{
				Reason: frame.ReasonEpochReset, LastDeliveredID: was, Epoch: b.epoch,
			}, j.now))
			b.idx.cnt.resyncs.Add(1)
		case ev > p && j.hasCursor:
			j.lead = append(j.lead, synth(id, frame.TypeStateResyncRequired, frame.ResyncData{
				Reason: frame.ReasonRingEvicted, LastDeliveredID: p, CompleteFromID: ev + 1,
			}, j.now))
			b.idx.cnt.resyncs.Add(1)
		}
		if ev > p {
			j.evicted = max(j.evicted, ev)
		}
	}
	return j
}

// openSet opens every session of ss (creating it when create is set), or
// fails with the first one's error, naming it. The structure lock is held
// exclusively.
func (b *Bus) openSet(ss *sessionSet, create bool) error {
	for _, id := range ss.order {
		if _, err := b.st.open(id, create); err != nil {
			return err
		}
	}
	return nil
}
