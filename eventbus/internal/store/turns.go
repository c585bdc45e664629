package store

import (
	"encoding/json"
	"slices"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/scope"
)

// A session's turns, as its turn records (turn_start, turn_cancel,
// turn_end) made them. The state is derived from the records as they are
// appended — by a publish in this process or by a backend's feed, through
// the same two steps: CheckTurn before the append (a record the state
// cannot take is not appended: a second turn_end of a turn, a turn_start
// while another turn is active), ApplyTurn after it. Every node that
// appends the same records in the same order knows the same turns. Locks
// as the session's log: its tree's lock under the structure lock's read
// side, or the structure lock held exclusively.

// Bounds of one session's turn state.
const (
	// MaxEndedTurns is the fewest ended turns a session remembers. It
	// remembers its max(MaxEndedTurns, log record bound) most recently
	// ended: every turn whose turn_end its log can hold, counted by ends
	// (not read from the log), so the same turns on every node with that
	// bound, whatever a node cleared or aged out. They are what Turn
	// finds after the end, and what makes a start reusing the id, or a
	// cancel of it, an error.
	MaxEndedTurns = 32
	// MaxHeldCancels is how many cancels of turns not yet started a
	// session holds; one more drops the oldest (TurnHeldDropped).
	MaxHeldCancels = 16
)

// Turn is one turn of a session. It holds ids, not its records, so that
// a turn remembered after they left the log keeps nothing of them.
type Turn struct {
	ID      string
	StartID uint64 // its turn_start's id
	EndID   uint64 // its turn_end's id; 0 while the turn is active
	// Reason and Message are the turn_end's.
	Reason, Message string
	// Cancel is the id of the turn_cancel applied to the turn, 0 when
	// none was.
	Cancel uint64
}

// held is a cancel of a turn that has not started (yet).
type held struct {
	turn   string
	cancel uint64 // the turn_cancel's id
	until  int64  // Unix ns: the hold ends then
}

// turns is a session's turn state.
type turns struct {
	active []*Turn // in start order; one at most, as CheckTurn admits
	// ended are the ended turns remembered, oldest end first, at most
	// Session.keepEnded; byID indexes them (an id is in ended once:
	// CheckTurn refuses to start a turn of a remembered id).
	ended []*Turn
	byID  map[string]*Turn
	held  []held // oldest first, at most MaxHeldCancels
}

// TurnChange is one change a turn record made.
type TurnChange[T any] struct {
	Kind    TurnChangeKind
	Session *Session[T] // the turn's session
	Turn    *Turn       // nil for TurnHeldDropped
	Held    string      // the turn id of a held cancel (TurnHeld, TurnHeldDropped)
	// Record is the turn record that made the change (TurnStarted,
	// TurnEnded: the turn's turn_start, turn_end), nil for the others.
	Record *queue.Record
}

// TurnChangeKind says what a [TurnChange] is.
type TurnChangeKind uint8

// The changes.
const (
	TurnStarted     TurnChangeKind = iota + 1 // a turn began
	TurnCancelled                             // a cancel was applied to an active turn (it still has to end)
	TurnEnded                                 // a turn ended
	TurnHeld                                  // a cancel of a turn not yet started is held
	TurnHeldDropped                           // a held cancel expired, or was pushed out by a newer one
)

// TurnRefusal says why CheckTurn refuses a record.
type TurnRefusal uint8

// The refusals.
const (
	TurnOK          TurnRefusal = iota
	TurnMalformed               // not a turn record's payload, or a bad turn id
	TurnBusy                    // turn_start while a turn of the session is active
	TurnKnown                   // turn_start of a turn id the session remembers as ended
	TurnNotActive               // turn_end of a turn that is not active
	TurnCancelFirst             // turn_end complete or error of a turn a cancel was applied to
)

// TurnRecord is a turn record's payload, decoded.
type TurnRecord struct {
	frame.TurnData
	Cascade bool   `json:"cascade,omitempty"`
	By      string `json:"by,omitempty"`
}

// IsTurnType reports whether typ is a turn record's type.
func IsTurnType(typ string) bool {
	return typ == frame.TypeTurnStart || typ == frame.TypeTurnEnd || typ == frame.TypeTurnCancel
}

// DecodeTurn decodes r's payload; false when it is not a turn record's (a
// turn_start or turn_end without a valid turn id, a turn_cancel with an
// invalid one).
func DecodeTurn(r *queue.Record) (TurnRecord, bool) {
	var d TurnRecord
	if json.Unmarshal(r.Data, &d) != nil {
		return d, false
	}
	if d.Turn == "" && r.Type == frame.TypeTurnCancel {
		return d, true
	}
	return d, frame.CheckName("turn id", d.Turn) == nil
}

// CheckTurn says whether the turn record r may be appended to x now.
func (x *Session[T]) CheckTurn(r *queue.Record) TurnRefusal {
	d, ok := DecodeTurn(r)
	if !ok {
		return TurnMalformed
	}
	t := x.turns
	switch r.Type {
	case frame.TypeTurnStart:
		if t != nil && len(t.active) > 0 {
			return TurnBusy
		}
		if x.EndedTurn(d.Turn) != nil {
			return TurnKnown
		}
	case frame.TypeTurnEnd:
		tn := x.ActiveTurnByID(d.Turn)
		if tn == nil {
			return TurnNotActive
		}
		if tn.Cancel != 0 && d.Reason != frame.ReasonCancelled && d.Reason != frame.ReasonProducerLost {
			// The cancel came first: the end its owner writes for it
			// (cancelled; producer_lost if the owner died) is the turn's,
			// so that the context was cancelled iff the turn ended so. In
			// memory the owner's end follows the cancel in one step.
			return TurnCancelFirst
		}
	}
	return TurnOK
}

// ApplyTurn applies r, a turn record just appended to x (CheckTurn
// admitted it; its id is set), and appends what changed to dst: a
// turn_start starts a turn (and applies a cancel held for its id, if the
// hold has not ended at r's time); a turn_end ends one; a turn_cancel
// cancels the turn it names, or every active turn of x, and with cascade
// every active turn of x's descendants — a named turn x does not know is
// held for hold ns. Held cancels whose hold ended by r's time are
// dropped.
func (x *Session[T]) ApplyTurn(r *queue.Record, hold int64, dst []TurnChange[T]) []TurnChange[T] {
	d, _ := DecodeTurn(r)
	if x.turns == nil {
		x.turns = new(turns)
	}
	t := x.turns
	dst = x.expireHeld(r.Nanos, dst)
	switch r.Type {
	case frame.TypeTurnStart:
		tn := &Turn{ID: d.Turn, StartID: r.ID}
		t.active = append(t.active, tn)
		dst = append(dst, TurnChange[T]{Kind: TurnStarted, Session: x, Turn: tn, Record: r})
		if i := slices.IndexFunc(t.held, func(h held) bool { return h.turn == d.Turn }); i >= 0 {
			tn.Cancel = t.held[i].cancel
			t.held = slices.Delete(t.held, i, i+1)
			dst = append(dst, TurnChange[T]{Kind: TurnCancelled, Session: x, Turn: tn})
		}
	case frame.TypeTurnEnd:
		i := slices.IndexFunc(t.active, func(tn *Turn) bool { return tn.ID == d.Turn })
		if i < 0 {
			return dst // CheckTurn refuses it
		}
		tn := t.active[i]
		t.active = slices.Delete(t.active, i, i+1)
		tn.EndID, tn.Reason, tn.Message = r.ID, d.Reason, d.Message
		if len(t.ended) >= max(x.keepEnded, MaxEndedTurns) {
			delete(t.byID, t.ended[0].ID)
			t.ended[0] = nil
			t.ended = t.ended[1:] // append reallocates: the array stays within twice the bound
		}
		if t.byID == nil {
			t.byID = make(map[string]*Turn)
		}
		t.ended = append(t.ended, tn)
		t.byID[tn.ID] = tn
		dst = append(dst, TurnChange[T]{Kind: TurnEnded, Session: x, Turn: tn, Record: r})
	case frame.TypeTurnCancel:
		switch {
		case d.Turn == "":
			dst = x.cancelActive(r.ID, dst)
		case x.ActiveTurnByID(d.Turn) != nil:
			tn := x.ActiveTurnByID(d.Turn)
			if tn.Cancel == 0 {
				tn.Cancel = r.ID
				dst = append(dst, TurnChange[T]{Kind: TurnCancelled, Session: x, Turn: tn})
			}
		case x.EndedTurn(d.Turn) == nil:
			dst = x.hold(d.Turn, r.ID, r.Nanos+hold, dst)
		}
		if d.Cascade {
			x.node.Walk(func(n *scope.Node[*Session[T]]) bool {
				if n.Value != x {
					dst = n.Value.cancelActive(r.ID, dst)
				}
				return true
			})
		}
	}
	return dst
}

// cancelActive applies the cancel with id to every active turn of x not
// cancelled yet.
func (x *Session[T]) cancelActive(id uint64, dst []TurnChange[T]) []TurnChange[T] {
	if x.turns == nil {
		return dst
	}
	for _, tn := range x.turns.active {
		if tn.Cancel == 0 {
			tn.Cancel = id
			dst = append(dst, TurnChange[T]{Kind: TurnCancelled, Session: x, Turn: tn})
		}
	}
	return dst
}

// hold holds the cancel with id of turn until the Unix ns until,
// replacing a cancel held for it already; past MaxHeldCancels the oldest
// goes.
func (x *Session[T]) hold(turn string, id uint64, until int64, dst []TurnChange[T]) []TurnChange[T] {
	t := x.turns
	t.held = slices.DeleteFunc(t.held, func(h held) bool { return h.turn == turn })
	if len(t.held) == MaxHeldCancels {
		dst = append(dst, TurnChange[T]{Kind: TurnHeldDropped, Session: x, Held: t.held[0].turn})
		t.held = slices.Delete(t.held, 0, 1)
	}
	t.held = append(t.held, held{turn: turn, cancel: id, until: until})
	return append(dst, TurnChange[T]{Kind: TurnHeld, Session: x, Held: turn})
}

// expireHeld drops the held cancels whose hold ended before now (Unix ns).
func (x *Session[T]) expireHeld(now int64, dst []TurnChange[T]) []TurnChange[T] {
	t := x.turns
	for len(t.held) > 0 && t.held[0].until < now {
		dst = append(dst, TurnChange[T]{Kind: TurnHeldDropped, Session: x, Held: t.held[0].turn})
		t.held = t.held[1:]
	}
	if len(t.held) == 0 {
		t.held = nil
	}
	return dst
}

// ActiveTurn returns x's active turn (the earliest started, should there
// be several), nil when none.
func (x *Session[T]) ActiveTurn() *Turn {
	if x.turns == nil || len(x.turns.active) == 0 {
		return nil
	}
	return x.turns.active[0]
}

// ActiveTurnByID returns x's active turn id, nil when it is not active.
func (x *Session[T]) ActiveTurnByID(id string) *Turn {
	if x.turns == nil {
		return nil
	}
	for _, tn := range x.turns.active {
		if tn.ID == id {
			return tn
		}
	}
	return nil
}

// EndedTurn returns the ended turn id if x remembers it (one of its
// max(MaxEndedTurns, log bound) most recently ended turns), else nil.
func (x *Session[T]) EndedTurn(id string) *Turn {
	if x.turns == nil {
		return nil
	}
	return x.turns.byID[id]
}

// ActiveTurns appends x's active turns to dst, and with cascade those of
// every session below x, each with its session.
func (x *Session[T]) ActiveTurns(cascade bool, dst []TurnChange[T]) []TurnChange[T] {
	add := func(y *Session[T]) {
		if y.turns != nil {
			for _, tn := range y.turns.active {
				dst = append(dst, TurnChange[T]{Kind: TurnStarted, Session: y, Turn: tn})
			}
		}
	}
	if !cascade {
		add(x)
		return dst
	}
	x.node.Walk(func(n *scope.Node[*Session[T]]) bool { add(n.Value); return true })
	return dst
}
