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

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, !o.RequireSession)
	if err != nil {
		return nil, err
	}
	if x.nsubs >= b.cfg.MaxSubscribers {
		return nil, &SubscriberLimitError{Session: x.id, Limit: b.cfg.MaxSubscribers}
	}
	b.nextSub++
	s.id, s.sess = b.nextSub, x

	// 1. register, under the publish lock.
	s.stopCtx = context.AfterFunc(ctx, func() { b.cancel(s, context.Cause(ctx)) })
	s.ctx, s.ctxDone = ctx, ctx.Done()
	b.registerLocked(s)
	x.touch(b.nowNanos())

	// 2. snapshot, under the same lock; 4. reinsert: the snapshot goes to
	// the head of the queue, ahead of any live event (3. drain) that a
	// publish appends once the lock is released.
	if o.HasCursor || !o.NoReplay {
		b.snapshotLocked(s, o)
	}
	return s, nil
}

// snapshotLocked queues the resync frame, the replayed history and
// replay_complete for s. b.mu must be held; s is not visible to any reader
// yet.
func (b *Bus) snapshotLocked(s *Subscription, o SubscribeOptions) {
	now := b.nowNanos()
	cursor := uint64(0)
	sid := s.sess.id
	reset := false
	if o.HasCursor {
		cursor = o.Cursor
		if (o.Epoch != "" && o.Epoch != b.epoch) || cursor >= max(b.nextID, b.highWater+1) {
			reset = true
			s.q = append(s.q, frame(sid, TypeStateResyncRequired, ResyncData{
				Reason: ReasonEpochReset, LastDeliveredID: o.Cursor, Epoch: b.epoch,
			}, now))
			b.stats.Resyncs++
			cursor = 0
		}
	}
	rings, lost := b.scopeRingsLocked(s.sess, s.kind)
	total := 0
	for _, r := range rings {
		total += r.Len() - r.Search(cursor)
	}
	snap := make([]*record, 0, total)
	for _, r := range rings {
		snap = r.AppendAfter(snap, cursor)
	}
	if len(rings) > 1 {
		slices.SortFunc(snap, func(a, b *record) int {
			switch {
			case a.id < b.id:
				return -1
			case a.id > b.id:
				return 1
			}
			return 0
		})
	}
	if o.HasCursor && !reset {
		evicted := lost
		for _, r := range rings {
			evicted = max(evicted, r.HighestEvicted())
		}
		if evicted > cursor {
			// The first id after which nothing is missing: with several
			// rings in scope a quiet ring may still hold ids older than what
			// a busy one already evicted, so it is not simply snap[0].
			earliest := max(b.nextID, b.highWater+1)
			if i, ok := slices.BinarySearchFunc(snap, evicted+1, func(r *record, id uint64) int {
				return cmpID(r.id, id)
			}); i < len(snap) || ok {
				earliest = snap[i].id
			}
			s.q = append(s.q, frame(sid, TypeStateResyncRequired, ResyncData{
				Reason: ReasonRingEvicted, LastDeliveredID: cursor, CompleteFromID: earliest,
			}, now))
			b.stats.Resyncs++
		}
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
	// Frames queued so far (epoch_reset, ring_evicted) lead; the replay
	// itself is handed to the consumer as the snapshot slice, read in place
	// before anything in the queue (no per-event queue entry).
	s.lead, s.q = s.q, nil
	s.pre = snap[:n:n]
	last := cursor
	if n > 0 {
		last = snap[n-1].id
	}
	truncated := n < len(snap)
	if truncated {
		s.q = append(s.q, frame(sid, TypeStateResyncRequired, ResyncData{
			Reason: ReasonReplayBudgetExceeded, LastDeliveredID: last,
			CompleteFromID: max(b.nextID, b.highWater+1), SkippedCount: len(snap) - n,
		}, now))
		b.stats.Resyncs++
	}
	if o.HasCursor || truncated {
		s.q = append(s.q, frame(sid, TypeReplayComplete, ReplayCompleteData{
			LastReplayedEventID: last, ReplayedCount: n,
		}, now))
	}
	// The reinsert guard: nothing at or below what the subscriber already
	// has is handed out. That is the cursor (0 after an epoch_reset), not
	// the last replayed id: the replayed events themselves still have to
	// pass the guard.
	s.lastSeen = cursor

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
