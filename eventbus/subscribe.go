package eventbus

import (
	"context"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/scope"
)

// Subscribe registers a subscriber on session sessionID and returns it. The
// subscriber reads the history in scope after o.Cursor (all of it without
// one; none with o.NoReplay), then replay_complete, then live events, each id
// once and in increasing order (docs/guarantees.md; the protocol is in
// docs/architecture.md). A lost position is announced with
// state_resync_required, or is a [*PositionLostError] with o.StrictCursor.
// The session is created unless o.RequireSession. The subscription ends when
// ctx is done. It does not block, except over a backend whose feed is behind
// the cursor (backend.Syncer). Errors: ErrInvalid, ErrSessionNotFound,
// ErrSessionClosed, ErrSubscriberLimit, ErrClosed, ctx's, [ErrBackend].
func (b *Bus) Subscribe(ctx context.Context, sessionID string, o SubscribeOptions) (*Subscription, error) {
	if err := checkName("session id", sessionID); err != nil {
		return nil, err
	}
	if !o.Scope.Valid() {
		return nil, invalidf("scope %d", int(o.Scope))
	}
	s := &Subscription{
		bus: b, kind: o.Scope, name: o.Name,
		q: queue.Queue{Lim: queue.Limits{Frames: int32(b.cfg.MaxQueueSize), Bytes: b.cfg.MaxQueuedBytes,
			Policy: queuePolicy(b.cfg.OverflowPolicy), Warn: !b.cfg.DisableSlowClientWarning}},
		wake: make(chan struct{}, 1),
	}
	if o.MaxQueued != 0 {
		if o.MaxQueued < 1 || o.MaxQueued > 1_000_000 {
			return nil, invalidf("MaxQueued %d out of range [1, 1000000]", o.MaxQueued)
		}
		s.q.Lim.Frames = int32(o.MaxQueued)
	}
	if o.MaxQueuedBytes != 0 {
		if o.MaxQueuedBytes < 1 || o.MaxQueuedBytes > 1<<30 {
			return nil, invalidf("MaxQueuedBytes %d out of range [1, 1073741824]", o.MaxQueuedBytes)
		}
		s.q.Lim.Bytes = o.MaxQueuedBytes
	}
	if o.Policy != "" {
		if err := o.Policy.validate(); err != nil {
			return nil, invalidf("%v", err)
		}
		s.q.Lim.Policy = queuePolicy(o.Policy)
	}
	if o.SlowClientWarning != nil {
		s.q.Lim.Warn = *o.SlowClientWarning
	}
	if err := s.setCoalescing(o); err != nil {
		return nil, err
	}
	if err := s.setFilter(o.Types); err != nil {
		return nil, err
	}
	if o.Client != "" {
		if err := checkName("client id", o.Client); err != nil {
			return nil, err
		}
	}
	if len(o.Sessions) > 0 || o.Floors != nil {
		set, err := newSessionSet(sessionID, o.Scope, o, b.hist.Get)
		if err != nil {
			return nil, err
		}
		if s.filter == nil {
			s.filter = &typeFilter{}
		}
		s.filter.set, s.kind = set, scope.All // an "all" subscriber with a set (multi.go)
	}
	if o.Client != "" || o.Presence {
		s.member = &presenceMember{client: o.Client, listen: o.Presence}
	}
	cursor := o.Cursor
	if o.NoReplay {
		cursor = nil // no history at all, whatever the cursor says
	}
	if cursor != nil && cursor.Epoch != "" {
		if err := checkEpoch(cursor.Epoch); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cursor != nil && (cursor.Epoch == "" || cursor.Epoch == b.epoch) {
		upTo := cursor.ID
		for _, f := range o.Floors {
			upTo = max(upTo, f)
		}
		if err := b.st.await(ctx, upTo); err != nil { // a bus over a backend may be behind
			return nil, err
		}
	}

	replay := !o.NoReplay
	var sr *snapReq
	if replay && b.cfg.Snapshots != nil && s.setOf() == nil {
		sr = &snapReq{}
		if o.Snapshot {
			sr.reason = frame.ReasonRequested
			cursor = b.takeSnapshot(ctx, sessionID, o.Scope, sr, cursor)
		}
	}
	if replay && o.StrictCursor && cursor != nil {
		if sr == nil {
			sr = &snapReq{}
		}
		sr.strict, sr.cursor = true, *cursor
	}
	var buf []*record // the snapshot's storage, allocated outside the lock when large
	if replay && s.kind == scope.Session && b.cfg.ReplayBufferSize > snapshotAllocUnderLock {
		// One ring in scope: its size bounds the snapshot, so the storage
		// is allocated here and the lock taken once.
		buf = make([]*record, 0, b.cfg.ReplayBufferSize)
	}
	for {
		if s.kind != scope.All {
			// The common case, a tree-scoped subscribe on a session that
			// exists: the structure lock's read side and the session's tree
			// lock, as its publishers take — other trees go on publishing.
			done, retry, err := b.subscribeInTree(ctx, s, sessionID, cursor, replay, &buf, sr)
			if err != nil {
				return nil, err
			}
			if done {
				return s, nil
			}
			if retry {
				if sr != nil && sr.lost != nil {
					return nil, sr.lost // StrictCursor
				}
				if sr != nil && sr.want {
					sr.want = false
					cursor = b.takeSnapshot(ctx, sessionID, o.Scope, sr, cursor)
				}
				continue
			}
		}
		// An "all" subscribe (its snapshot spans every tree), or a session
		// to create or refuse: the structure lock, exclusively.
		b.hist.Lock()
		if b.hist.Closed() {
			b.hist.Unlock()
			return nil, ErrClosed
		}
		x, err := b.st.open(sessionID, !o.RequireSession)
		if err != nil {
			b.hist.Unlock()
			return nil, err
		}
		if x.Subscribers() >= b.cfg.MaxSubscribers {
			b.hist.Unlock()
			return nil, limitf(x.ID, b.cfg.MaxSubscribers)
		}
		if s.setOf() != nil {
			if err := b.openSet(s.setOf(), !o.RequireSession); err != nil {
				b.hist.Unlock()
				return nil, err
			}
		}
		var job snapshotJob
		if replay && s.setOf() != nil {
			job = b.snapshotPlanSetLocked(s, cursor, s.filter.list())
		} else if replay {
			job = b.snapshotPlanLocked(x, s.kind, cursor, s.filter.list(), sr)
			if job.lost {
				// The position is lost and a snapshot replaces it: ask
				// the provider without the lock, then start over.
				b.hist.Unlock()
				if sr.lost != nil {
					return nil, sr.lost // StrictCursor
				}
				sr.want = false
				cursor = b.takeSnapshot(ctx, sessionID, o.Scope, sr, cursor)
				continue
			}
			if job.total > snapshotAllocUnderLock && cap(buf) < job.total {
				// A large resume: allocate its storage without the lock
				// (an allocation of that size may assist the GC), then
				// start over; nothing is registered yet.
				b.hist.Unlock()
				buf = make([]*record, 0, job.total+job.total/8)
				continue
			}
		}
		b.register(ctx, s, x, registerNow(b, &job, replay))
		if replay {
			b.snapshotLocked(&job, buf)
		}
		b.hist.Unlock()
		if replay {
			if testHookSnapshot != nil {
				testHookSnapshot(s)
			}
			b.finishSnapshot(s, &job)
		}
		return s, nil
	}
}

// subscribeInTree is Subscribe's steps 1 and 2 for a session, descendants
// or subtree scope on a session that exists, under the structure lock's
// read side and the session's tree lock: every list it registers in and
// every replay buffer it copies lies in that one tree, and every publish
// that could reach s holds the same tree lock. It reports done when s is
// subscribed (err nil) or refused (err set); retry after it allocated a
// large snapshot's storage into *buf without any lock, or found the
// position lost with a snapshot provider to ask (start over); neither
// when the session is not there (the caller takes the exclusive path to
// create or refuse it).
func (b *Bus) subscribeInTree(ctx context.Context, s *Subscription, sessionID string, cursor *Position, replay bool, buf *[]*record, sr *snapReq) (done, retry bool, err error) {
	tok := b.hist.RLock()
	if b.hist.Closed() {
		b.hist.RUnlock(tok)
		return true, false, ErrClosed
	}
	x, ok := b.hist.Lookup(sessionID)
	if !ok {
		b.hist.RUnlock(tok)
		return false, false, nil
	}
	tl := x.TreeLock()
	tl.Lock()
	if x.Subscribers() >= b.cfg.MaxSubscribers {
		tl.Unlock()
		b.hist.RUnlock(tok)
		return true, false, limitf(x.ID, b.cfg.MaxSubscribers)
	}
	var job snapshotJob
	if replay {
		job = b.snapshotPlanLocked(x, s.kind, cursor, s.filter.list(), sr)
		if job.lost {
			tl.Unlock()
			b.hist.RUnlock(tok)
			return false, true, nil // the caller takes the snapshot and starts over
		}
		if job.total > snapshotAllocUnderLock && cap(*buf) < job.total {
			tl.Unlock()
			b.hist.RUnlock(tok)
			*buf = make([]*record, 0, job.total+job.total/8)
			return false, true, nil
		}
	}
	b.register(ctx, s, x, registerNow(b, &job, replay))
	if replay {
		b.snapshotLocked(&job, *buf)
	}
	tl.Unlock()
	b.hist.RUnlock(tok)
	if replay {
		if testHookSnapshot != nil {
			testHookSnapshot(s)
		}
		b.finishSnapshot(s, &job)
	}
	return true, false, nil
}

// register is step 1: it makes s a subscriber of x under the lock that
// every Publish reaching s holds: x's tree lock (the structure lock's
// read side held too) for the session, descendants and subtree scopes,
// the structure lock exclusively for any scope (required for "all").
//
// The race it closes: AgentPool's asyncio subscribe could register after a
// publish had picked its targets and before the publish appended to the
// replay buffer, so an event could miss both the live queue and the replay.
// Here the publisher appends to the ring and offers to the registered
// subscribers in one critical section that excludes register (the tree
// lock for a tree-scoped subscriber; for an "all" subscriber, the
// structure lock held exclusively keeps every publisher out), so an event is either
// published before register (it is in the ring, for the snapshot) or after
// (it is queued for s) — never neither.
//
// now is the session's new last-activity time: the replay plan's clock
// reading (registerNow), taken in the same critical section.
func (b *Bus) register(ctx context.Context, s *Subscription, x *session, now int64) {
	s.id, s.sess = b.idx.cnt.nextSub.Add(1), x
	s.ctx = ctx
	s.stopCtx = context.AfterFunc(ctx, s.ctxEnded)
	b.idx.register(s)
	x.Touch(now)
}

// drain is step 3, on the consumer's side: it takes every live event (and
// frame) queued since the last drain out of the shared queue in one step and
// makes it the consumer's local batch, giving the publisher the consumer's
// spent buffer back (zero allocation in steady state). s.mu must be held.
//
// The race it closes: publishers append to the shared queue while the
// consumer is still handing out the snapshot; those events wait there, in
// publish order, instead of being interleaved with the history (AgentPool
// drains its queue after the replay for the same reason). Taking the whole
// queue under s.mu means a publish lands either in this batch or in the
// next one — never lost, never read twice.
func (s *Subscription) drain() { s.q.Drain(&s.rd) }

// reinsert is step 4: it returns the next frame for the consumer, in
// delivery order — the leading resync frames, the snapshot (Replay=true),
// then the drained batch (replay_complete and the live events) — and false
// when the local batch is spent (the caller then drains again or waits).
//
// The race it closes: an event could in principle be both in the snapshot
// and drained live, or a live event could overtake the history; the guard
// hands out each id at most once and only in increasing order (AgentPool's
// reinsert skips ids ≤ the last replayed one). With register and snapshot
// in one critical section the guard never fires; Stats.Guarded counts it
// if it ever does, and the tests require zero.
//
// It writes the frame into *ev (the caller's result: an Event is built once
// per delivery, never copied on its way out) and reports whether it did.
func (s *Subscription) reinsert(ev *Event) bool { return s.reinsertOwing(ev, nil) }

// reinsertOwing is reinsert for a batch reader (fill): with owed non-nil,
// what the frame takes out of the live limits is added to *owed, which the
// reader settles (queue.Reader.Settle) before it takes s.mu and before it
// returns its batch, instead of one atomic add per frame.
func (s *Subscription) reinsertOwing(ev *Event, owed *uint64) bool {
	if s.discard.Load() {
		s.rd.Reset()
		s.lead = nil
		return false
	}
	if len(s.lead) > 0 {
		fillEntry(ev, &s.lead[0])
		s.lead = s.lead[1:]
		return true
	}
	for r := s.rd.NextReplay(); r != nil; r = s.rd.NextReplay() {
		if r.ID <= s.lastSeen {
			s.bus.idx.cnt.guarded.Add(1)
			continue
		}
		s.lastSeen = r.ID
		fillEvent(ev, r, true)
		return true
	}
	for {
		e, last := s.rd.Take(owed)
		if e == nil {
			return false
		}
		if id := e.Rec.ID; id != 0 {
			if id <= s.lastSeen {
				// The guard: never hand out an id twice or out of order.
				s.bus.idx.cnt.guarded.Add(1)
				*e = entry{}
				continue
			}
			s.lastSeen = id
		}
		if e.Kind == queue.KindDropped && last {
			if owed != nil {
				s.rd.Settle(owed) // before s.mu, as fill does
			}
			s.mergeDrops(e.Drop)
		}
		if e.Kind == queue.KindDropped || e.Kind == queue.KindGap {
			// The gap follows what this consumer really received; the
			// publisher no longer touches an entry it has handed over.
			e.Drop.LastDelivered = s.lastSeen
		}
		fillEntry(ev, e)
		*e = entry{} // let the data go
		return true
	}
}

// registerNow is the clock reading register stamps the session with: the
// replay plan's, read moments before under the same lock (one clock read
// per resume instead of two), or a fresh one when nothing is replayed.
func registerNow(b *Bus, job *snapshotJob, replay bool) int64 {
	if replay {
		return job.now
	}
	return b.nowNanos()
}
