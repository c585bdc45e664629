package eventbus

import (
	"context"
	"slices"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/scope"
)

// snapReq is one subscribe's snapshot: asked for at join
// (SubscribeOptions.Snapshot), or taken when the plan finds the
// subscriber's position lost (ring_evicted, epoch_reset). The provider is
// asked again when the events after its state were evicted before the
// subscriber could register (a publisher ran a whole buffer ahead in
// between), at most maxSnapshotAsks times per subscribe.
type snapReq struct {
	reason string // why a snapshot is wanted; "" none
	asks   int    // how often the provider was asked
	want   bool   // the plan asks for a (new) snapshot
	frame  *entry // the snapshot frame, once taken
	reset  *entry // the epoch_reset frame that goes before it, when the cursor was another epoch's

	// StrictCursor (lost.go): a lost position is refused, not replaced.
	strict bool
	cursor Position           // the cursor, for the error
	lost   *PositionLostError // set by the plan that found it lost
}

// maxSnapshotAsks bounds how often one subscribe asks the provider.
const maxSnapshotAsks = 3

// wantsSnapshot reports, under the locks of the plan, whether j's
// position is lost and a snapshot should replace it: the bus has a
// provider that was not asked yet. It records why in sr. A StrictCursor
// subscribe's lost position is reported too, with its error in sr.lost.
func (b *Bus) wantsSnapshot(sr *snapReq, j *snapshotJob) bool {
	if sr == nil || !j.hasCursor {
		return false
	}
	reason := ""
	switch {
	case j.reset:
		reason = frame.ReasonEpochReset
	case j.evicted > j.cursor:
		reason = frame.ReasonRingEvicted
	default:
		return false
	}
	if sr.strict {
		sr.refuseLost(reason, b.epoch, j) // Subscribe returns the error
		return true
	}
	if sr.asks >= maxSnapshotAsks || b.cfg.Snapshots == nil {
		return false
	}
	if sr.reason == "" {
		sr.reason = reason // a snapshot asked for again keeps its first reason
	}
	sr.want = true
	return true
}

// takeSnapshot asks the provider for req's state, with no lock held,
// and on success returns the cursor the replay continues from (the id the
// state reflects) with sr.frame set; otherwise it returns cursor unchanged
// and the subscribe goes on as without a provider.
func (b *Bus) takeSnapshot(ctx context.Context, session string, sc scope.Kind, sr *snapReq, cursor *Position) *Position {
	sr.asks++
	state, asOf, err := b.cfg.Snapshots(ctx, session, sc)
	if err != nil || !validJSON(state) {
		sr.asks = maxSnapshotAsks // a provider that fails is not asked again
		return cursor
	}
	// A bus over a backend may not have it yet; one that cannot say goes
	// on without the snapshot, as when it is not there.
	if err := b.st.await(ctx, asOf); err != nil || asOf > b.LastEventID() {
		sr.asks = maxSnapshotAsks
		return cursor
	}
	e := synth(session, frame.TypeSnapshot, frame.SnapshotData{Reason: sr.reason, LastEventID: asOf, State: state}, b.nowNanos())
	sr.frame = &e
	return &Position{Epoch: b.epoch, ID: asOf}
}

// testHookSnapshot, when set by a test, runs between the copy under the
// lock and finishSnapshot.
var testHookSnapshot func(*Subscription)

// snapshotAllocUnderLock is the largest snapshot whose storage is allocated
// with a bus lock held; a larger one is allocated before registering.
const snapshotAllocUnderLock = 4096

// snapshotJob is one subscribe's replay (step 2): planned and copied under
// the locks of register (snapshotPlanLocked, snapshotLocked), finished outside them
// (finishSnapshot).
type snapshotJob struct {
	rings     []store.Log[*record]
	nrings    int    // len(rings) as planned: one ring's snapshot is in id order
	total     int    // entries to copy (exact while the lock is held)
	cursor    uint64 // replay ids above this (0 after an epoch_reset)
	reset     bool   // epoch_reset: the cursor was from another epoch or ahead
	hasCursor bool   // the subscribe carried a cursor
	evicted   uint64 // highest id lost or evicted in scope (ring_evicted when > cursor)
	earliest  uint64 // the next id: completeFromId of ring_evicted when nothing newer is held, and of a budget cut
	now       int64
	lead      []entry   // frames before the replay (snapshot, epoch_reset)
	snap      []*record // the copied entries, oldest first per ring
	lost      bool      // the position is lost and a snapshot is to replace it: nothing was planned
	set       bool      // a many-sessions subscription's (multi.go): per holds its logs, lead its resync frames
	per       []setRings
}

// snapshotPlanLocked decides what a subscribe of x with scope k and cursor
// pos (nil: everything held) replays. The caller holds x's tree lock under
// the structure lock's read side (the scope's logs all lie in x's tree),
// or the structure lock exclusively (required for the all scope).
func (b *Bus) snapshotPlanLocked(x *session, k scope.Kind, pos *Position, types []string, sr *snapReq) snapshotJob {
	j := snapshotJob{now: b.nowNanos(), earliest: b.st.horizon(), hasCursor: pos != nil}
	if sr != nil && sr.frame != nil {
		if sr.reset != nil {
			j.lead = append(j.lead, *sr.reset)
			b.idx.cnt.resyncs.Add(1)
		}
		j.lead = append(j.lead, *sr.frame)
	}
	if pos != nil {
		j.cursor = pos.ID
		if (pos.Epoch != "" && pos.Epoch != b.epoch) || j.cursor >= j.earliest {
			// Another incarnation's cursor: this history is replayed from
			// its start, after the epoch_reset frame.
			j.reset = true
			j.cursor = 0
		}
	}
	var lost uint64
	j.rings, lost = b.hist.ScopeLogs(x, k, nil)
	j.evicted, j.nrings = lost, len(j.rings)
	for _, r := range j.rings {
		r.Expire(j.now) // an age bound evicts here too, not only at a publish
		j.total += r.CountAfter(j.cursor)
		j.evicted = max(j.evicted, r.HighestEvictedOf(types))
	}
	if j.reset {
		// The restart sequence (docs/protocol.md, "After a restart"):
		// state_resync_required{epoch_reset} always comes first; a
		// snapshot follows only when this epoch's history in scope is no
		// longer whole, else the whole of it is replayed.
		reset := synth(x.ID, frame.TypeStateResyncRequired, frame.ResyncData{
			Reason: frame.ReasonEpochReset, LastDeliveredID: pos.ID, Epoch: b.epoch,
		}, j.now)
		// A StrictCursor subscribe is refused here whatever the buffer
		// holds (wantsSnapshot records its error).
		if (j.evicted > 0 || sr != nil && sr.strict) && b.wantsSnapshot(sr, &j) {
			sr.reset = &reset
			return snapshotJob{lost: true}
		}
		j.lead = append(j.lead, reset)
		b.idx.cnt.resyncs.Add(1)
	}
	if j.hasCursor && !j.reset && j.evicted > j.cursor {
		if b.wantsSnapshot(sr, &j) {
			return snapshotJob{lost: true}
		}
		b.idx.cnt.resyncs.Add(1) // the ring_evicted frame finishSnapshot writes
	}
	return j
}

// snapshotLocked is step 2 under the lock: it copies the ring entries in
// scope with id > cursor (pointers to the shared records) into buf, in
// the same critical section as register (see register for the locks).
//
// The race it closes: taken under the same lock as register, the snapshot
// holds exactly the events published before s was registered, and the live
// queue exactly those after — so nothing falls between history and live
// and nothing is in both (taking it after releasing the lock would let a
// publish fall between the two).
func (b *Bus) snapshotLocked(j *snapshotJob, buf []*record) {
	j.snap = buf[:0]
	for _, r := range j.rings {
		j.snap = r.AppendAfter(j.snap, j.cursor)
	}
	for _, p := range j.per {
		for _, r := range p.rings {
			j.snap = r.AppendAfter(j.snap, p.pos)
		}
	}
	j.rings, j.per = nil, nil
}

// finishSnapshot is the rest of step 2, without any bus lock: it turns the
// copied snapshot into what s reads first — the leading resync frames, the
// replay (merged by id across rings, so a descendants or all resume is one
// ordered stream, and cut at the replay byte budget) and replay_complete
// (with a cursor, or after a cut replay). It runs before s is returned to
// its reader; publishers may already have queued live events for s, and the
// frames go ahead of them.
func (b *Bus) finishSnapshot(s *Subscription, j *snapshotJob) {
	sid := s.sess.ID
	snap, cursor, hasCursor := j.snap, j.cursor, j.hasCursor
	if j.set {
		// Frames of the whole set name no session. Sessions of a set may
		// share logs (a session and its parent's descendants): the
		// copies are merged by id, each record once.
		sid = ""
		slices.SortFunc(snap, func(a, b *record) int { return cmpID(a.ID, b.ID) })
		snap = slices.CompactFunc(snap, func(a, b *record) bool { return a.ID == b.ID })
	}
	if s.filter != nil {
		// The copy is s's own: filter it in place.
		snap = slices.DeleteFunc(snap, func(r *record) bool { return !s.filter.has(r.Type) })
	}
	// The replay byte budget: at least one event, then stop before the
	// event that would exceed it. One pass finds the cut, checks the order
	// (a single ring is in id order; several are merged by sorting) and
	// looks for a compacting log's folded records (merged here, not under
	// the lock, before the cut is found again). The pass is skipped when
	// none of that can apply — one ring, no compaction, and the snapshot
	// within the budget even if every record held the largest payload the
	// bus ever stored — so that the reader's is the only read of the
	// records (docs/benchmarks.md, "W3 replay (issue 22.2)").
	n, sorted, folded := len(snap), true, false
	if j.nrings > 1 || b.cfg.ReplayCompact != nil || int64(len(snap))*b.hist.MaxData() > b.cfg.ReplayBudgetBytes {
		n, sorted, folded = budgetCut(snap, b.cfg.ReplayBudgetBytes)
	}
	if folded {
		snap = mergeFolds(snap)
		n, sorted, _ = budgetCut(snap, b.cfg.ReplayBudgetBytes)
	}
	if !sorted {
		slices.SortFunc(snap, func(a, b *record) int { return cmpID(a.ID, b.ID) })
		n, _, _ = budgetCut(snap, b.cfg.ReplayBudgetBytes)
	}
	lead := j.lead
	if hasCursor && !j.reset && j.evicted > cursor && !j.set {
		// The first id after which nothing is missing: with several rings
		// in scope a quiet ring may still hold ids older than what a busy
		// one already evicted, so it is not simply snap[0].
		earliest := j.earliest
		if i, ok := slices.BinarySearchFunc(snap, j.evicted+1, func(r *record, id uint64) int {
			return cmpID(r.ID, id)
		}); i < len(snap) || ok {
			earliest = snap[i].ID
		}
		lead = append(lead, synth(sid, frame.TypeStateResyncRequired, frame.ResyncData{
			Reason: frame.ReasonRingEvicted, LastDeliveredID: cursor, CompleteFromID: earliest,
		}, j.now))
	}
	last := cursor
	if n > 0 {
		last = snap[n-1].ID
	}
	var tail []entry
	truncated := n < len(snap)
	if truncated {
		tail = append(tail, synth(sid, frame.TypeStateResyncRequired, frame.ResyncData{
			Reason: frame.ReasonReplayBudgetExceeded, LastDeliveredID: last,
			CompleteFromID: j.earliest, SkippedCount: len(snap) - n,
		}, j.now))
		b.idx.cnt.resyncs.Add(1)
	}
	// The history is not whole when events in scope after the cursor
	// (any, without one) were evicted: the replay_complete says so, and
	// is sent for that reason too.
	historyLost := j.evicted > cursor
	if hasCursor || truncated || historyLost {
		var first uint64
		if n > 0 {
			first = snap[0].ID
		}
		tail = append(tail, replayCompleteEntry(sid, last, n, first, historyLost, j.now))
	}
	if cap(snap) > 4*n+snapshotAllocUnderLock {
		// Storage sized for the whole ring, a short replay: do not keep it.
		snap = slices.Clone(snap[:n])
	}
	// The consumer's side: the leading frames (epoch_reset, ring_evicted),
	// then the replay handed over as the snapshot slice, read in place
	// before anything in the queue (no per-event queue entry). s is not yet
	// visible to its reader.
	s.lead = append(s.lead, lead...) // after the presence frame, if any (presence.go)
	s.rd.SetReplay(snap[:n:n])
	// The reinsert guard: nothing at or below what the subscriber already
	// has is handed out. That is the cursor (0 after an epoch_reset), not
	// the last replayed id: the replayed events themselves still have to
	// pass the guard.
	s.lastSeen = cursor
	if len(tail) > 0 {
		s.mu.Lock()
		s.q.Prepend(tail)
		s.mu.Unlock()
	}
	b.idx.cnt.replayed.Add(int64(n))
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// budgetCut returns how many of snap's records fit the replay byte budget
// (at least one, then up to the record that would exceed it), whether
// snap is in id order, and whether it holds a compacting log's folded
// record (to merge before the cut: mergeFolds); the order and the folds
// are checked over the whole of snap. It is the one pass over the
// records before the reader's.
func budgetCut(snap []*record, budget int64) (n int, sorted, folded bool) {
	n, sorted = len(snap), true
	used, prev := int64(0), uint64(0)
	for i, r := range snap {
		if r.ID < prev {
			sorted = false
		}
		prev = r.ID
		if r.Ext != nil && r.Ext.Fold != nil {
			folded = true
		}
		if n == len(snap) {
			c := int64(len(r.Data))
			if i > 0 && used+c > budget {
				n = i
			}
			used += c
		}
	}
	return n, sorted, folded
}
