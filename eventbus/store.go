package eventbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/scope"
)

// The store seam. A bus's history lives in this process either way
// (history: package internal/store, filled by publishes or by a backend's
// feed); the store is where an event enters it and where its ids come
// from. memStore, the in-memory bus, takes each id as it appends the event
// and delivers it under the session's tree lock; fedStore, a bus made with
// NewWithBackend, appends to the backend, whose feed brings every event
// back to every node in id order, where its memStore appends and delivers
// it. The delivery protocol above (Subscribe, the index, the queues) does
// not know which one runs.

type (
	history = store.History[subs]
	session = store.Session[subs]
)

// eventStore is what the bus asks of where its events are stored:
// memStore or fedStore. Its methods take the locks they need and never
// call back into the Bus.
type eventStore interface {
	// publish stores r (its id 0) in session id, created unless !create,
	// and delivers it; p, when set, is its producer's stamp, checked and
	// recorded with it (producer.go's rules).
	publish(id string, r *record, create bool, p *producer.Stamp) (Event, error)
	// open returns session id, created as a root (or under the parent the
	// session controller names) in this process when create is set; the
	// structure lock is held exclusively (an implicit Subscribe).
	open(id string, create bool) (*session, error)
	// create is CreateSession, after the ids were checked.
	create(id, parent string) error
	// closeSession is CloseSession (CloseSessionTree with cascade).
	closeSession(id string, cascade bool) error
	// checkProducer is CheckProducer, after the ids were checked.
	checkProducer(id string, p *producer.Stamp) error
	// startTurn, endTurn, cancelTurns and publishInTurn write the turn
	// API's records and a turn's events (turnstore.go, lease.go).
	startTurn(ctx context.Context, t *Turn, r *record) error
	endTurn(t *Turn, r *record) (Event, error)
	cancelTurns(ctx context.Context, id string, d frame.TurnData, r *record) (CancelResult, error)
	publishInTurn(t *Turn, r *record, p *producer.Stamp) (Event, error)
	// await returns once the history holds cursor, or gives up (a
	// backend's feed may be behind); an error wraps ErrBackend when the
	// backend cannot say how far behind it is.
	await(ctx context.Context, cursor uint64) error
	// horizon returns the next id no subscriber can have seen yet.
	horizon() uint64
	// pipeline returns the store a Pipeline keeps appends in flight
	// through (a backend's that keeps them), nil when each publish
	// completes at once.
	pipeline() *fedStore
	// shutdown releases what the store holds (Bus.Close).
	shutdown() error
}

// memStore is the in-memory store, and the local side of a fedStore: the
// history and the delivery index, and the steps that change both.
type memStore struct {
	h          *history
	idx        *index
	now        func() time.Time
	controller func(sessionID string) (parentID string) // Options.SessionController
	tk         *turnKeeper                              // the bus's turns (turnstore.go)
}

func (m *memStore) nowNanos() int64 { return m.now().UnixNano() }

// open returns session id, creating it as a root — or under the parent
// the session controller names — when create is set. Errors:
// ErrSessionClosed, ErrSessionNotFound, or a controller's panic (ErrInvalid).
// The structure lock is held exclusively.
func (m *memStore) open(id string, create bool) (*session, error) {
	if x := m.h.Get(id); x != nil {
		return x, nil
	}
	if m.h.Tombstoned(id) {
		return nil, fmt.Errorf("%w: %q", ErrSessionClosed, id)
	}
	if !create {
		return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	if m.controller != nil {
		return m.addAsked(id, nil)
	}
	return m.h.Add(id, "", m.nowNanos())
}

// maxAskDepth bounds how many ancestors one [Options.SessionController]
// lookup may create.
const maxAskDepth = 64

// addAsked creates the unknown session id under the parent the session
// controller names, creating that parent first (asking again) when the bus
// does not know it either. asking holds the ids being created further
// down, so a controller that answers with a cycle ends it: the session
// that would close it becomes a root. A controller that panics fails the
// whole creation with the error askParent makes of it.
func (m *memStore) addAsked(id string, asking []string) (*session, error) {
	parent, err := m.askParent(id)
	if err != nil {
		return nil, err
	}
	switch {
	case parent == "" || parent == id || checkName("parent session id", parent) != nil,
		len(asking) >= maxAskDepth, slices.Contains(asking, parent):
		parent = ""
	case m.h.Tombstoned(parent):
		parent = ""
	case m.h.Get(parent) == nil:
		if _, err := m.addAsked(parent, append(asking, id)); errors.Is(err, errControllerPanicked) {
			return nil, err
		} else if err != nil {
			parent = ""
		}
	}
	return m.h.Add(id, parent, m.nowNanos())
}

// errControllerPanicked marks the error of a session controller that
// panicked (wrapped with ErrInvalid).
var errControllerPanicked = errors.New("session controller panicked")

// askParent asks the session controller for id's parent. The controller
// runs with the structure lock held exclusively: a panic in it must not
// leave the lock held (every later call of the bus would wait forever), so
// it is recovered and returned as an ErrInvalid error naming it.
func (m *memStore) askParent(id string) (parent string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w for session %q: %v", ErrInvalid, errControllerPanicked, id, p)
		}
	}()
	return m.controller(id), nil
}

func (m *memStore) create(id, parent string) error {
	m.h.Lock()
	defer m.h.Unlock()
	_, _, _, err := m.createLocked(id, parent)
	return err
}

// createLocked is CreateSession under the structure lock held exclusively:
// x is id's session, fresh when it was created (reopened: its id had been
// closed) and attached when the existing root x got its parent; all false
// with a nil error when nothing changed.
func (m *memStore) createLocked(id, parent string) (x *session, fresh, reopened bool, err error) {
	if m.h.Closed() {
		return nil, false, false, ErrClosed
	}
	if parent != "" && m.h.Tombstoned(parent) {
		return nil, false, false, fmt.Errorf("%w: parent %q", ErrSessionClosed, parent)
	}
	x = m.h.Get(id)
	if x == nil {
		if parent == id {
			return nil, false, false, fmt.Errorf("%w: %q under itself", scope.ErrCycle, id)
		}
		reopened = m.h.Tombstoned(id)
		if x, err = m.h.Add(id, parent, m.nowNanos()); err != nil {
			return nil, false, false, err
		}
		// A reopened id is a new incarnation: it takes back its log while
		// that is still kept (History.Add); otherwise its log starts
		// empty, marked evicted up to what the closed one held, so an old
		// cursor gets ring_evicted.
		m.h.Untombstone(id)
		return x, true, reopened, nil
	}
	old := x.Parent()
	if old != nil && old.ID == parent || old == nil && parent == "" {
		return nil, false, false, nil
	}
	if old != nil {
		return nil, false, false, invalidf("session %q already has parent %q, cannot move it under %q", id, old.ID, parent)
	}
	if err := m.attach(x, parent); err != nil {
		return nil, false, false, err
	}
	return x, false, false, nil
}

// attach gives the root x its parent: its subtree subscribers move to
// the parent's list. The structure lock is held exclusively.
func (m *memStore) attach(x *session, parent string) error {
	if err := m.h.Attach(x, parent); err != nil {
		return err
	}
	m.idx.reparent(x, nil, x.Parent())
	return nil
}

func (m *memStore) closeSession(id string, cascade bool) error {
	m.h.Lock()
	defer m.h.Unlock()
	if m.h.Closed() {
		return ErrClosed
	}
	x := m.h.Get(id)
	if x == nil {
		return nil
	}
	for _, y := range closeTargets(x, cascade) {
		m.closeLocked(y, true)
	}
	return nil
}

// closeTargets returns what CloseSession (or, cascading,
// CloseSessionTree) closes, in order.
func closeTargets(x *session, cascade bool) []*session {
	if cascade {
		return x.Subtree()
	}
	return []*session{x}
}

// closeLocked closes x. With announce it publishes session_closed and
// tombstones x (the feed does both itself); expiry does neither. x's own
// subscribers end after they drain, and its children move up to its
// parent. The structure lock is held exclusively.
func (m *memStore) closeLocked(x *session, announce bool) {
	if announce {
		m.endTurnsLocked(x, frame.ReasonCancelled, "session closed")
	}
	now := m.nowNanos()
	if announce {
		r := &record{Session: x.ID, Type: frame.TypeSessionClosed, Nanos: now,
			Data: mustJSON(frame.SessionClosedData{Session: x.ID, Reason: "closed"})}
		m.appendLocked(x, r, true, &fan{}) // wakes at once
		m.h.Tombstone(x.ID, now)
	}
	m.idx.endSession(x)
	if sh := m.tk.hub.share; sh != nil && x.Subs.pres.Load() != nil {
		sh.gone(x.ID) // this node's part of its presence goes too
	}
	p, kids := m.h.Remove(x, now)
	for _, c := range kids {
		m.idx.reparent(c, x, p)
	}
	x.Subs.childSubtree = nil
}

func (m *memStore) checkProducer(id string, p *producer.Stamp) error {
	tok := m.h.RLock()
	defer m.h.RUnlock(tok)
	x, err := m.lookup(id)
	if err != nil {
		return err
	}
	tl := x.TreeLock()
	tl.Lock()
	err = checkProducer(x, p)
	tl.Unlock()
	return err
}

// lookup returns session id for a call that does not create it: ErrClosed,
// ErrSessionClosed or ErrSessionNotFound when it cannot. The structure
// lock's read side is held.
func (m *memStore) lookup(id string) (*session, error) {
	if m.h.Closed() {
		return nil, ErrClosed
	}
	if x, ok := m.h.Lookup(id); ok {
		return x, nil
	}
	if m.h.Tombstoned(id) {
		return nil, fmt.Errorf("%w: %q", ErrSessionClosed, id)
	}
	return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
}

// await has nothing to wait for in memory: every id below the next is held
// or was evicted.
func (m *memStore) await(context.Context, uint64) error { return nil }

func (m *memStore) horizon() uint64 { return m.h.LastID() + 1 }

func (m *memStore) pipeline() *fedStore { return nil }

func (m *memStore) shutdown() error { return nil }
