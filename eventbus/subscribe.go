package eventbus

import (
	"context"
	"slices"

	"github.com/replaybus/replaybus/replay"
	"github.com/replaybus/replaybus/scope"
)

// Subscribe registers a subscriber on session sessionID and returns its
// [Subscription]. It follows AgentPool's four steps, made race-free for real
// threads (docs/guarantees.md, "history before live"):
//
//  1. register the subscriber under the lock that Publish holds;
//  2. snapshot, under that same lock, the replay-buffer entries in scope
//     with id > cursor (merged by id across sessions for multi-session
//     scopes), so nothing falls between register and snapshot and nothing is
//     in both;
//  3. drain: live events published from then on wait in the live queue;
//  4. reinsert: the subscriber reads the snapshot first (Replay=true), then
//     replay_complete (with a cursor, or when the replay byte budget cut the
//     replay short), then the live events, skipping any id ≤ the last
//     replayed one as a guard.
//
// With a cursor (o.HasCursor), a state_resync_required frame precedes the
// replay when the cursor is from another epoch or at/after the next id
// (epoch_reset: the whole buffer is replayed) or when a session in scope
// already dropped events after the cursor (ring_evicted). The replay stops
// at the replay byte budget (replay_budget_exceeded). Replayed and synthetic
// frames never count against the live queue limits (qwen-code's forced
// entries).
//
// The session is created as a root when it does not exist, unless
// o.RequireSession is set. The subscription ends when ctx is done (Err is
// ctx's error); Subscribe itself does not block, except on a bus over a
// backend whose feed is behind the cursor (see [Syncer]).
//
// Errors: ErrInvalid naming a bad option value; ErrSessionNotFound;
// ErrSessionClosed; a *SubscriberLimitError (errors.Is ErrSubscriberLimit)
// when the session has MaxSubscribers subscribers; ErrClosed after Close;
// ctx's error when ctx is already done.
func (b *Bus) Subscribe(ctx context.Context, sessionID string, o SubscribeOptions) (*Subscription, error) {
	if err := checkName("session id", sessionID); err != nil {
		return nil, err
	}
	if !o.Scope.Valid() {
		return nil, invalidf("scope %d", int(o.Scope))
	}
	s := &Subscription{
		bus: b, kind: o.Scope, name: o.Name,
		maxQueued: b.cfg.MaxQueueSize, maxBytes: b.cfg.MaxQueuedBytes, policy: b.cfg.OverflowPolicy,
		warnOn: !b.cfg.DisableSlowClientWarning,
		wake:   make(chan struct{}, 1), done: make(chan struct{}),
	}
	if o.MaxQueued != 0 {
		if o.MaxQueued < 1 || o.MaxQueued > 1_000_000 {
			return nil, invalidf("MaxQueued %d out of range [1, 1000000]", o.MaxQueued)
		}
		s.maxQueued = o.MaxQueued
	}
	if o.MaxQueuedBytes != 0 {
		if o.MaxQueuedBytes < 1 || o.MaxQueuedBytes > 1<<30 {
			return nil, invalidf("MaxQueuedBytes %d out of range [1, 1073741824]", o.MaxQueuedBytes)
		}
		s.maxBytes = o.MaxQueuedBytes
	}
	if o.Policy != "" {
		if err := o.Policy.Validate(); err != nil {
			return nil, invalidf("%v", err)
		}
		s.policy = o.Policy
	}
	if o.SlowClientWarning != nil {
		s.warnOn = *o.SlowClientWarning
	}
	if err := s.setCoalescing(o); err != nil {
		return nil, err
	}
	if o.Epoch != "" {
		if err := checkEpoch(o.Epoch); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.HasCursor && (o.Epoch == "" || o.Epoch == b.epoch) {
		b.awaitFeed(ctx, o.Cursor) // backend buses only, see Syncer
	}

	replay := o.HasCursor || !o.NoReplay
	var buf []*record // the snapshot's storage, allocated outside the lock when large
	if replay && o.Scope == scope.Session && b.cfg.ReplayBufferSize > snapshotAllocUnderLock {
		// One ring in scope: its size bounds the snapshot, so the storage
		// is allocated here and the lock taken once.
		buf = make([]*record, 0, b.cfg.ReplayBufferSize)
	}
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		x, err := b.sessionLocked(sessionID, !o.RequireSession)
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		if x.nsubs >= b.cfg.MaxSubscribers {
			b.mu.Unlock()
			return nil, &SubscriberLimitError{Session: x.id, Limit: b.cfg.MaxSubscribers}
		}
		var job snapshotJob
		if replay {
			job = b.snapshotPlanLocked(x, s.kind, o)
			if job.total > snapshotAllocUnderLock && cap(buf) < job.total {
				// A large resume: allocate its storage without the lock
				// (an allocation of that size may assist the GC), then
				// start over; nothing is registered yet.
				b.mu.Unlock()
				buf = make([]*record, 0, job.total+job.total/8)
				continue
			}
		}
		b.nextSub++
		s.id, s.sess = b.nextSub, x

		// 1. register, under the publish lock.
		s.stopCtx = context.AfterFunc(ctx, func() { b.cancel(s, context.Cause(ctx)) })
		s.ctx, s.ctxDone = ctx, ctx.Done()
		b.registerLocked(s)
		x.touch(b.nowNanos())

		// 2. snapshot: the ring entries in scope with id > cursor are
		// copied (pointers to shared records) under the same lock, so the
		// snapshot holds exactly the events published before the
		// registration and the live queue exactly those after.
		if replay {
			job.snap = buf[:0]
			for _, r := range job.rings {
				job.snap = r.AppendAfter(job.snap, job.cursor)
			}
			job.rings = nil
		}
		b.mu.Unlock()
		// The rest — merging, the replay budget, the frames — is done
		// without the lock, so that a large resume does not stall the
		// publishers of other sessions (issue 12.8); 4. reinsert: it goes
		// to the head of the queue, ahead of any live event (3. drain)
		// published meanwhile.
		if replay {
			if testHookSnapshot != nil {
				testHookSnapshot(s)
			}
			b.finishSnapshot(s, &job)
		}
		return s, nil
	}
}

// testHookSnapshot, when set by a test, runs between the copy under the
// lock and finishSnapshot.
var testHookSnapshot func(*Subscription)

// snapshotAllocUnderLock is the largest snapshot whose storage is allocated
// with the bus lock held; a larger one is allocated before registering.
const snapshotAllocUnderLock = 4096

// snapshotJob is one subscribe's replay: decided under the bus lock
// (snapshotPlanLocked), copied under it, finished outside it.
type snapshotJob struct {
	rings     []*replay.Buffer[*record]
	total     int    // entries to copy (an upper bound once the lock is released)
	cursor    uint64 // replay ids above this (0 after an epoch_reset)
	reset     bool   // epoch_reset: the cursor was from another epoch or ahead
	hasCursor bool   // the subscribe carried a cursor
	evicted   uint64 // highest id lost or evicted in scope (ring_evicted when > cursor)
	earliest  uint64 // the next id: completeFromId of ring_evicted when nothing newer is held, and of a budget cut
	now       int64
	lead      []entry   // frames before the replay (epoch_reset)
	snap      []*record // the copied entries, oldest first per ring
}

// snapshotPlanLocked decides what a subscribe of x with scope k replays.
// b.mu must be held.
func (b *Bus) snapshotPlanLocked(x *session, k scope.Kind, o SubscribeOptions) snapshotJob {
	j := snapshotJob{now: b.nowNanos(), earliest: max(b.nextID, b.highWater+1), hasCursor: o.HasCursor}
	if o.HasCursor {
		j.cursor = o.Cursor
		if (o.Epoch != "" && o.Epoch != b.epoch) || j.cursor >= j.earliest {
			j.reset = true
			j.lead = append(j.lead, frame(x.id, TypeStateResyncRequired, ResyncData{
				Reason: ReasonEpochReset, LastDeliveredID: o.Cursor, Epoch: b.epoch,
			}, j.now))
			b.stats.Resyncs++
			j.cursor = 0
		}
	}
	var lost uint64
	j.rings, lost = b.scopeRingsLocked(x, k)
	j.evicted = lost
	for _, r := range j.rings {
		j.total += r.Len() - r.Search(j.cursor)
		j.evicted = max(j.evicted, r.HighestEvicted())
	}
	if o.HasCursor && !j.reset && j.evicted > j.cursor {
		b.stats.Resyncs++ // the ring_evicted frame finishSnapshot writes
	}
	return j
}

// finishSnapshot turns the copied snapshot into what s reads first: the
// leading resync frames, the replay (merged by id across rings, cut at the
// replay byte budget) and replay_complete. It runs without the bus lock,
// before s is returned to its reader; publishers may already have queued
// live events for s, and the frames go ahead of them.
func (b *Bus) finishSnapshot(s *Subscription, j *snapshotJob) {
	sid := s.sess.id
	snap, cursor, hasCursor := j.snap, j.cursor, j.hasCursor
	if len(snap) > 1 && !slices.IsSortedFunc(snap, func(a, b *record) int { return cmpID(a.id, b.id) }) {
		slices.SortFunc(snap, func(a, b *record) int { return cmpID(a.id, b.id) })
	}
	lead := j.lead
	if hasCursor && !j.reset && j.evicted > cursor {
		// The first id after which nothing is missing: with several rings
		// in scope a quiet ring may still hold ids older than what a busy
		// one already evicted, so it is not simply snap[0].
		earliest := j.earliest
		if i, ok := slices.BinarySearchFunc(snap, j.evicted+1, func(r *record, id uint64) int {
			return cmpID(r.id, id)
		}); i < len(snap) || ok {
			earliest = snap[i].id
		}
		lead = append(lead, frame(sid, TypeStateResyncRequired, ResyncData{
			Reason: ReasonRingEvicted, LastDeliveredID: cursor, CompleteFromID: earliest,
		}, j.now))
	}
	// The replay byte budget: at least one event, then stop before the
	// event that would exceed it.
	n, used := 0, int64(0)
	for n < len(snap) {
		c := int64(len(snap[n].data))
		if n > 0 && used+c > b.cfg.ReplayBudgetBytes {
			break
		}
		used += c
		n++
	}
	last := cursor
	if n > 0 {
		last = snap[n-1].id
	}
	var tail []entry
	truncated := n < len(snap)
	if truncated {
		tail = append(tail, frame(sid, TypeStateResyncRequired, ResyncData{
			Reason: ReasonReplayBudgetExceeded, LastDeliveredID: last,
			CompleteFromID: j.earliest, SkippedCount: len(snap) - n,
		}, j.now))
		b.lateResyncs.Add(1)
	}
	if hasCursor || truncated {
		tail = append(tail, frame(sid, TypeReplayComplete, ReplayCompleteData{
			LastReplayedEventID: last, ReplayedCount: n,
		}, j.now))
	}
	// The consumer's side: the leading frames, then the replay read in
	// place (no queue entry per replayed event). s is not yet visible to
	// its reader.
	s.lead = lead
	if cap(snap) > 4*n+snapshotAllocUnderLock {
		// Storage sized for the whole ring, a short replay: do not keep it.
		snap = slices.Clone(snap[:n])
	}
	s.pre = snap[:n:n]
	// The reinsert guard: nothing at or below what the subscriber already
	// has is handed out. That is the cursor (0 after an epoch_reset), not
	// the last replayed id: the replayed events themselves still have to
	// pass the guard.
	s.lastSeen = cursor
	if len(tail) > 0 {
		s.mu.Lock()
		s.q = append(tail, s.q[s.qh:]...)
		s.qh = 0
		s.mu.Unlock()
	}
	b.replayed.Add(int64(n))
}

// scopeRingsLocked returns the replay buffers a subscriber of x with scope k
// replays from, and the highest id lost with sessions that were in that
// scope and have been closed or expired.
func (b *Bus) scopeRingsLocked(x *session, k scope.Kind) ([]*replay.Buffer[*record], uint64) {
	switch k {
	case scope.Descendants:
		var rings []*replay.Buffer[*record]
		x.node.Walk(func(n *scope.Node[*session]) bool {
			rings = append(rings, n.Value.ring)
			return true
		})
		return rings, x.descLost
	case scope.Subtree:
		rings := []*replay.Buffer[*record]{x.ring}
		lost := x.subtreeLost
		if p := x.parent(); p != nil {
			rings = append(rings, p.ring)
			lost = max(lost, p.childLost)
			p.node.Children(func(c *scope.Node[*session]) bool {
				if c.Value != x {
					rings = append(rings, c.Value.ring)
				}
				return true
			})
		}
		return rings, lost
	case scope.All:
		var rings []*replay.Buffer[*record]
		b.tree.Each(func(n *scope.Node[*session]) { rings = append(rings, n.Value.ring) })
		return rings, b.allLost
	}
	return []*replay.Buffer[*record]{x.ring}, 0
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
