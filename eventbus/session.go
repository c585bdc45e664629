package eventbus

import (
	"time"

	"github.com/replaybus/replaybus/eventbus/internal/diag"

	"github.com/replaybus/replaybus/eventbus/observe"
)

// The session API of the Bus: the tree of sessions, their lifecycle and
// what a listing reads. The history of each session is the store's
// (store.go, package internal/store); these methods check their arguments
// and take the locks.

// CreateSession creates session id under parent ("" for a root); reopens a
// closed id (a new incarnation that takes back its kept replay buffer, or
// starts empty with ring_evicted for older cursors); or attaches an existing
// root to parent, after which its history joins parent's wider scopes. The
// same parent again is a no-op. Errors: ErrInvalid (bad id, or id has
// another parent), scope.ErrUnknownParent, scope.ErrCycle, ErrSessionClosed
// (closed parent), ErrClosed, a backend's error.
func (b *Bus) CreateSession(id, parent string) error {
	if err := checkName("session id", id); err != nil {
		return err
	}
	if parent != "" {
		if err := checkName("parent session id", parent); err != nil {
			return err
		}
	}
	return b.st.create(id, parent)
}

// SessionClosed reports whether session id was closed and not reopened
// since; a closed id is remembered for the session TTL.
func (b *Bus) SessionClosed(id string) bool {
	tok := b.hist.RLock()
	defer b.hist.RUnlock(tok)
	return b.hist.Tombstoned(id)
}

// ClearReplayBuffer empties session id's replay buffer; a resume from
// before it gets ring_evicted. An unknown or closed id is a no-op. It waits
// only for publishes to id's tree. Errors: ErrClosed.
func (b *Bus) ClearReplayBuffer(id string) error {
	tok := b.hist.RLock()
	defer b.hist.RUnlock(tok)
	if b.hist.Closed() {
		return ErrClosed
	}
	if x, ok := b.hist.Lookup(id); ok {
		tl := x.TreeLock()
		tl.Lock()
		b.hist.Clear(x)
		tl.Unlock()
	}
	return nil
}

// CloseSession publishes session_closed to session id (a real event, queued
// even into full queues), ends its own subscribers once they have drained
// (ErrSessionClosed) and moves its children up to its parent. Its buffer
// stays readable for its ancestors' scopes (Options.ClosedRetention). Later
// publishes and subscribes to id fail with ErrSessionClosed until
// [Bus.CreateSession] reopens it. A closed or unknown id is a no-op. Errors:
// ErrClosed, a backend's error.
func (b *Bus) CloseSession(id string) error { return b.st.closeSession(id, false) }

// CloseSessionTree closes session id and every session below it as
// [Bus.CloseSession] does, children first. A closed or unknown id is a no-op.
func (b *Bus) CloseSessionTree(id string) error { return b.st.closeSession(id, true) }

// SessionExists reports whether session id exists: created and neither
// closed nor expired. It takes no lock and never waits for a publish.
func (b *Bus) SessionExists(id string) bool {
	_, ok := b.hist.Lookup(id)
	return ok
}

// Sessions lists every live session, in no order. It never waits for a
// publish; each figure is exact at some instant during the call.
func (b *Bus) Sessions() []observe.SessionInfo { return b.hist.Sessions() }

// SessionInfo returns what [Bus.Sessions] lists for session id, and false
// when it does not exist. O(1); it never waits for a publish.
func (b *Bus) SessionInfo(id string) (observe.SessionInfo, bool) { return b.hist.Info(id) }

// ExpireIdle frees every session idle (no publish, own subscriber or child)
// for the session TTL, forgets older closed ids and returns how many sessions
// it expired. The bus calls it periodically.
func (b *Bus) ExpireIdle() int {
	defer b.idx.flush() // after the lock is released
	b.hist.Lock()
	defer b.hist.Unlock()
	if b.hist.Closed() {
		return 0
	}
	idle := b.hist.Expire(b.nowNanos())
	if b.idx.report != nil || b.idx.logger != nil {
		for _, x := range idle {
			b.idx.diagnose(diag.Expired, &Subscription{sess: x}, &record{})
		}
	}
	return len(idle)
}

// expireLoop runs ExpireIdle every quarter of the session TTL or of the
// closed retention, whichever is shorter (at most once a minute), until
// Close.
func (b *Bus) expireLoop() {
	defer close(b.ttl.done)
	every := min(b.cfg.SessionTTL, b.cfg.ClosedRetention) / 4
	if every > time.Minute {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.ttl.stop:
			return
		case <-t.C:
			b.ExpireIdle()
		}
	}
}
