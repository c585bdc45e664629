package eventbus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// The turn records' writes, and what the bus does when the store's turn
// state changes. Every turn record, written here or brought by a
// backend's feed (fed.go: Ingest), is checked against the state before it
// is appended (Session.CheckTurn: a record the state cannot take is not
// stored — a second turn_end, a turn_start while a turn is active) and
// applied after (applyTurnLocked, the one path of both): the store
// changes the state, and the bus acts on the changes — a cancel applied
// to a turn this bus runs cancels its context and ends it (in memory in
// the same critical section, so turn_cancel and its turn_end are
// adjacent in the log), an end releases the turn, presence follows the
// session's turn.

type turnChange = store.TurnChange[subs]

// turnKeeper is what the bus keeps about turns beside the store's state:
// the turns this bus runs (owned: by session and id), the cancel hold,
// the counters of Stats; over a backend, the ends being written.
type turnKeeper struct {
	owned *xsync.MapOf[turnKey, *Turn]
	hold  int64 // Options.CancelHold, ns
	lease time.Duration
	mem   *memStore
	fed   *fedStore // nil in memory
	hub   *presenceHub
	wg    sync.WaitGroup // over a backend: ends being written, leases released (spawn)
	// gmu guards closing: set by wait, after which spawn starts nothing.
	gmu     sync.Mutex
	closing bool

	started, ended, cancelled, failed, lost, held, dropped atomic.Uint64
}

// applyTurnLocked applies r, a turn record just appended to x, to the
// store's turn state and acts on the changes, which it returns. The
// caller holds x's tree lock under the structure lock's read side, or the
// structure lock exclusively; f collects the wake-ups.
func (m *memStore) applyTurnLocked(x *session, r *record, f *fan) []turnChange {
	tk := m.tk
	ch := x.ApplyTurn(r, tk.hold, nil)
	for i := 0; i < len(ch); i++ {
		c := ch[i]
		switch c.Kind {
		case store.TurnStarted:
			tk.started.Add(1)
			tk.hub.turnChanged(c.Session, c.Turn.ID, false)
		case store.TurnCancelled:
			t, ok := tk.owned.Load(turnKey{c.Session.ID, c.Turn.ID})
			if !ok {
				continue // another node runs it and ends it
			}
			if tk.fed != nil {
				t.cancel(turnCause(c.Turn, frame.ReasonCancelled, ""))
				tk.endLater(t, frame.ReasonCancelled, "")
				continue
			}
			// The owner is this process: the end follows the cancel at
			// once, in the same critical section.
			er := endRecord(c.Session.ID, t, frame.ReasonCancelled, "", r.Nanos)
			m.appendLocked(c.Session, er, false, f)
			ch = c.Session.ApplyTurn(er, tk.hold, ch)
		case store.TurnEnded:
			tk.ended.Add(1)
			switch c.Turn.Reason {
			case frame.ReasonCancelled:
				tk.cancelled.Add(1)
			case frame.ReasonError:
				tk.failed.Add(1)
			case frame.ReasonProducerLost:
				tk.lost.Add(1)
			}
			tk.hub.turnChanged(c.Session, c.Turn.ID, true)
			if t, ok := tk.owned.Load(turnKey{c.Session.ID, c.Turn.ID}); ok {
				t.finish(eventOf(c.Record, false), c.Turn.Reason, turnCause(c.Turn, c.Turn.Reason, c.Turn.Message))
				if tk.fed != nil {
					tk.release(t)
				}
			}
		case store.TurnHeld:
			tk.held.Add(1)
		case store.TurnHeldDropped:
			tk.dropped.Add(1)
		}
	}
	return ch
}

// endRecord is t's turn_end record in session with reason and message.
func endRecord(session string, t *Turn, reason, message string, nanos int64) *record {
	return &record{Session: session, Type: frame.TypeTurnEnd, Ext: extOf(t.origin, 0), Nanos: nanos,
		Data: mustJSON(frame.TurnData{Turn: t.id, Reason: reason, Message: message})}
}

// turnCause is the cause a turn's context is cancelled with.
func turnCause(tn *store.Turn, reason, message string) error {
	if tn.Cancel != 0 && reason == frame.ReasonCancelled {
		return fmt.Errorf("%w: turn %q cancelled (turn_cancel %d)", context.Canceled, tn.ID, tn.Cancel)
	}
	if message != "" {
		return fmt.Errorf("%w: turn %q ended: %s: %s", context.Canceled, tn.ID, reason, message)
	}
	return fmt.Errorf("%w: turn %q ended: %s", context.Canceled, tn.ID, reason)
}

// inTree runs fn on session id under the locks a publish there takes: the
// structure lock's read side and the session's tree lock; f collects the
// wake-ups, sent once they are released. Errors: ErrClosed,
// ErrSessionClosed, ErrSessionNotFound, fn's.
func (m *memStore) inTree(id string, fn func(x *session, f *fan) error) error {
	f := newFan()
	defer f.release()
	tok := m.h.RLock()
	defer m.h.RUnlock(tok)
	x, err := m.lookup(id)
	if err != nil {
		return err
	}
	tl := x.TreeLock()
	tl.Lock()
	defer tl.Unlock()
	return fn(x, &f)
}

// startTurn writes t's turn_start r to its session (store.startTurn in
// memory).
func (m *memStore) startTurn(_ context.Context, t *Turn, r *record) error {
	return m.inTree(t.session, func(x *session, f *fan) error {
		if err := refusal(x, r, t.id); err != nil {
			return err
		}
		m.appendLocked(x, r, false, f)
		t.start = eventOf(r, false)
		m.tk.owned.Store(turnKey{x.ID, t.id}, t)
		m.applyTurnLocked(x, r, f)
		return nil
	})
}

// refusal is the error for a turn_start r of turn id the state refuses.
func refusal(x *session, r *record, id string) error {
	switch x.CheckTurn(r) {
	case store.TurnBusy:
		return fmt.Errorf("%w: session %q has turn %q", ErrTurnActive, x.ID, x.ActiveTurn().ID)
	case store.TurnKnown:
		return fmt.Errorf("%w: turn %q of session %q (a turn id is used once)", ErrTurnEnded, id, x.ID)
	}
	return nil
}

// endTurn writes t's turn_end r, unless t has ended: then it returns
// that end (store.endTurn in memory).
func (m *memStore) endTurn(t *Turn, r *record) (Event, error) {
	err := m.inTree(t.session, func(x *session, f *fan) error {
		if tn := x.ActiveTurnByID(t.id); tn != nil && tn.StartID == t.start.ID {
			m.appendLocked(x, r, false, f)
			m.applyTurnLocked(x, r, f)
		}
		return nil
	})
	if ev, ok := t.endEvent(); ok {
		return ev, nil
	}
	if err == nil {
		err = t.endedErr()
	}
	return Event{}, err
}

// cancelTurns writes the turn_cancel r (request d) to session id and
// applies it (store.cancelTurns in memory).
func (m *memStore) cancelTurns(_ context.Context, id string, d frame.TurnData, r *record) (CancelResult, error) {
	res := CancelResult{Cancelled: []string{}, Held: []string{}}
	err := m.inTree(id, func(x *session, f *fan) error {
		if d.Turn != "" && x.ActiveTurnByID(d.Turn) == nil && x.EndedTurn(d.Turn) != nil {
			return fmt.Errorf("%w: turn %q of session %q", ErrTurnEnded, d.Turn, x.ID)
		}
		r.Session = x.ID
		m.appendLocked(x, r, false, f)
		for _, c := range m.applyTurnLocked(x, r, f) {
			switch c.Kind {
			case store.TurnCancelled:
				res.Cancelled = append(res.Cancelled, c.Turn.ID)
			case store.TurnHeld:
				res.Held = append(res.Held, c.Held)
			}
		}
		return nil
	})
	return res, err
}

// publishInTurn publishes r to t's session while t is active
// (store.publishInTurn in memory): checked under the tree lock, so that
// nothing of t follows its turn_end.
func (m *memStore) publishInTurn(t *Turn, r *record, p *producer.Stamp) (Event, error) {
	var ev Event
	err := m.inTree(t.session, func(x *session, f *fan) error {
		if tn := x.ActiveTurnByID(t.id); tn == nil || tn.StartID != t.start.ID {
			return t.endedErr()
		}
		if p != nil {
			if err := checkProducer(x, p); err != nil {
				return err
			}
		}
		r.Session = x.ID
		m.appendLocked(x, r, false, f)
		if p != nil {
			commitProducer(x, p, r.ID)
		}
		ev = eventOf(r, false)
		return nil
	})
	return ev, err
}

// endTurnsLocked ends every active turn of x with reason and message (x
// is closing, or the bus is). The caller holds the structure lock
// exclusively.
func (m *memStore) endTurnsLocked(x *session, reason, message string) {
	for _, c := range x.ActiveTurns(false, nil) {
		t, ok := m.tk.owned.Load(turnKey{x.ID, c.Turn.ID})
		if !ok {
			t = &Turn{id: c.Turn.ID}
		}
		r := endRecord(x.ID, t, reason, message, m.nowNanos())
		m.appendLocked(x, r, false, &fan{}) // wakes at once
		m.applyTurnLocked(x, r, &fan{})
	}
}

// endOwnTurnsLocked ends the turns this bus runs as it closes: in memory
// with turn_end{producer_lost} in the log, which subscribers read before
// their end; over a backend (where the goodbye wrote them, if it could)
// by cancelling their contexts. The structure lock is held exclusively.
func (tk *turnKeeper) endOwnTurnsLocked() {
	if tk.fed == nil {
		tk.mem.h.Each(func(x *session) {
			if x.ActiveTurn() != nil {
				tk.mem.endTurnsLocked(x, frame.ReasonProducerLost, "bus closed")
			}
		})
		return
	}
	tk.owned.Range(func(_ turnKey, t *Turn) bool {
		t.cancel(fmt.Errorf("%w: turn %q: %w", context.Canceled, t.id, ErrClosed))
		return true
	})
}

// wait waits for the goroutines of turns and presence over a backend
// (Close, once the bus is closed: each ends promptly).
func (tk *turnKeeper) wait() {
	tk.gmu.Lock()
	tk.closing = true
	tk.gmu.Unlock()
	tk.wg.Wait()
	if sh := tk.hub.share; sh != nil {
		<-sh.done
	}
}

// stats fills the turn counters of st.
func (tk *turnKeeper) stats(st *observe.Stats) {
	st.TurnsStarted = tk.started.Load()
	st.TurnsEnded = tk.ended.Load()
	st.TurnsCancelled = tk.cancelled.Load()
	st.TurnsFailed = tk.failed.Load()
	st.TurnsLost = tk.lost.Load()
	st.CancelsHeld = tk.held.Load()
	st.CancelsExpired = tk.dropped.Load()
}

// sessionGone cancels the contexts of the turns this node runs in x,
// which a backend's feed closed before their ends came (fed.go: Ingest).
// The structure lock is held exclusively.
func (tk *turnKeeper) sessionGone(x *session) {
	for _, c := range x.ActiveTurns(false, nil) {
		if t, ok := tk.owned.Load(turnKey{x.ID, c.Turn.ID}); ok {
			t.cancel(fmt.Errorf("%w: turn %q: %w", context.Canceled, t.id, ErrSessionClosed))
			tk.owned.Delete(turnKey{x.ID, c.Turn.ID})
		}
	}
}
