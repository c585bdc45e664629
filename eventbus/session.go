package eventbus

import (
	"time"

	"github.com/replaybus/replaybus/eventbus/observe"
)

// The session API of the Bus: the tree of sessions, their lifecycle and
// what a listing reads. The history of each session is the store's
// (store.go, package internal/store); these methods check their arguments
// and take the locks.

// CreateSession creates session id under parent ("" for a root), or
// brings it into the tree:
//
//   - an unknown id is created under parent;
//   - a closed id is reopened (AgentPool's closed sessions come back with
//     ACP session/resume or session/load, same id): a new incarnation under
//     the same bus sequence, so its ids go on rising. It takes back its old
//     replay buffer (session_closed included) while that is still kept for
//     its tree (Options.ClosedRetention), so a resume from before the close
//     loses nothing; otherwise it starts empty and a subscriber that
//     resumes with a cursor from before the close is told what it cannot
//     get back with state_resync_required{ring_evicted} — never silence;
//   - an existing root is attached to parent, at any time, even after it
//     published (agent pools learn the link late): from then on its events
//     reach parent's descendants, subtree and ancestors' subscribers, and a
//     descendants subscribe or resume on an ancestor replays its history
//     merged by id;
//   - calling it again with the same parent is a no-op.
//
// Errors (each naming the ids): ErrInvalid for a bad id, or when id already
// has another parent (a session is attached once; it is not moved between
// parents); scope.ErrUnknownParent for an unknown parent; scope.ErrCycle
// when parent is id or lies below it; ErrSessionClosed when parent was
// closed (reopen it first); ErrClosed after Close. Over a backend
// ([NewWithBackend]) the creation, reopening or attachment is also
// appended to the backend so every node learns it, and the backend's
// error is returned.
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

// SessionClosed reports whether session id was closed and has not been
// reopened since. A closed id is remembered for the session TTL; after that
// it is simply unknown (SessionClosed and SessionExists both false).
//
// It takes the structure lock's read side: it waits only for a structural
// change, never for a publish.
func (b *Bus) SessionClosed(id string) bool {
	tok := b.hist.RLock()
	defer b.hist.RUnlock(tok)
	return b.hist.Tombstoned(id)
}

// ClearReplayBuffer empties session id's replay buffer, as AgentPool's
// clear_replay_buffer (which agent servers call at the start of every
// turn). The cleared ids count as evicted: a later resume from before them
// gets ring_evicted. Like AgentPool's, it is a no-op (nil) for an id the bus
// does not know or that was closed. It holds the lock of id's session tree
// (under the structure lock's read side), as a publish there does: other
// trees' publishers do not wait for it. Errors: ErrClosed after Close.
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

// CloseSession closes session id (AgentPool's close_session): it publishes a
// session_closed event (a real event with an id) that every subscriber in
// scope receives even when its queue is full, ends the session's own
// subscribers once they have drained (their Err is ErrSessionClosed) and
// removes it from the tree. Its replay buffer stays readable for the
// descendants and all scopes of its open ancestors, so that a client of the
// run that resumes after the sub-agent finished loses nothing, until the
// tree's root closes, Options.ClosedRetention passes or Options.MaxRetained
// buffers are kept (a root's buffer goes at once). Its children move up to
// its parent (roots when it was a root), so the tree stays connected: a
// descendants subscriber of an ancestor keeps hearing them, as in
// AgentPool, whose tree keeps the closed link. Subscribers of other
// sessions that heard it (descendants, subtree, all) receive session_closed
// and go on.
//
// Later publishes and subscribes to id fail with ErrSessionClosed for the
// session TTL, unless [Bus.CreateSession] reopens it, so that a late
// publish cannot resurrect a closed session unnoticed (docs/python-parity.md
// compares AgentPool).
//
// Closing a closed or unknown session is a no-op (nil), as in AgentPool.
// Errors: ErrClosed after Close; over a backend, the backend's error.
func (b *Bus) CloseSession(id string) error { return b.st.closeSession(id, false) }

// CloseSessionTree closes session id and every session below it, however
// deep, each as [Bus.CloseSession] does: children before their parent (so
// each child's session_closed precedes its parent's), siblings in id order.
// On a closed or unknown id it is a no-op (nil).
func (b *Bus) CloseSessionTree(id string) error { return b.st.closeSession(id, true) }

// SessionExists reports whether session id exists: created and neither
// closed nor expired. It takes no lock and never waits for a publish.
func (b *Bus) SessionExists(id string) bool {
	_, ok := b.hist.Lookup(id)
	return ok
}

// Sessions lists every live session, in no particular order, O(sessions).
// It never waits for a publish (only, briefly, for a structural change, to
// read parents). A session created or closed during the call may or may
// not be listed; each session's figures are read one by one.
func (b *Bus) Sessions() []observe.SessionInfo { return b.hist.Sessions() }

// SessionInfo returns what [Bus.Sessions] lists for session id — its
// parent, subscribers, events buffered and LastEventID, the newest id
// published to it — and false when no such session exists (never created,
// closed or expired). Like Sessions it never waits for a publish: one
// lookup in the session registry and atomic reads, O(1). Safe for
// concurrent use.
func (b *Bus) SessionInfo(id string) (observe.SessionInfo, bool) { return b.hist.Info(id) }

// SubscriberCounts returns the number of subscribers made on each session
// that has any. Like Sessions, it never waits for a publish.
func (b *Bus) SubscriberCounts() map[string]int { return b.hist.SubscriberCounts() }

// ExpireIdle frees every session idle — no publish, no subscriber of its
// own, no child — for at least the session TTL, and forgets closed ids
// older than it; it returns how many sessions it expired. The bus's
// expiry goroutine calls it periodically. An expired id can be used again
// (a new session); a resume that needed its events gets ring_evicted.
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
			b.idx.diagnose(observe.DiagSessionExpired, &Subscription{sess: x}, &record{})
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
