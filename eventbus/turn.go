package eventbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/store"
)

// Turns: a producer's turn on a session, its start and its one end as
// records in the session's log (turn_start, turn_end), and cancels as
// records too (turn_cancel). The state — which turn is active, which
// ended how, which cancels are held — is the store's, derived from the
// records as they are appended (internal/store, turns.go); this file is
// the API, turnstore.go the writes and what the bus does when the state
// changes.

var (
	// ErrTurnActive: the session has an active turn ([Bus.StartTurn]); the
	// error names the session and that turn.
	ErrTurnActive = errors.New("eventbus: turn active")
	// ErrTurnEnded: the turn has ended ([Turn.Publish], [Bus.Cancel] of
	// it, [Bus.StartTurn] reusing its id); the error names it.
	ErrTurnEnded = errors.New("eventbus: turn ended")
)

// TurnOptions configure [Bus.StartTurn]. The zero value starts a turn
// with a generated id.
type TurnOptions struct {
	// ID is the turn's id, unique within the session while the session
	// remembers the turn (see [Bus.Turn]: a reuse is ErrTurnEnded); a
	// client may choose it, to cancel the turn before its start is seen.
	// The rules of a session id apply. "" generates "turn_" and 16 hex
	// digits.
	ID string
	// Origin stamps the turn's records with the id of the client that
	// caused the turn (as [WithOrigin]).
	Origin string
}

// CancelResult is what [Bus.Cancel] did: the ids of the turns it ended,
// and of those it holds because they have not started.
type CancelResult struct {
	Cancelled []string `json:"cancelled"`
	Held      []string `json:"held"`
}

// Turn is a producer's turn on a session, made by [Bus.StartTurn]. Its
// context is cancelled when a cancel is applied to it; it ends exactly
// once — by [Turn.End], by a cancel, when its context or its session
// ends, or when the bus closes — with one turn_end record in the log. All
// methods are safe for concurrent use.
type Turn struct {
	bus     *Bus
	id      string
	session string
	origin  string
	start   Event
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu    sync.Mutex
	ended bool
	end   Event
	endc  chan struct{} // closed once ended
	watch func() bool   // stops the watch of StartTurn's context
}

// turnKey names a turn in the bus's table of the turns it runs.
type turnKey struct{ session, id string }

// StartTurn writes a turn_start record to the existing session sessionID
// and returns the turn. Its context (with ctx's values) ends on a cancel,
// when ctx ends, or when the bus closes; a held cancel applies at once. It
// blocks only over a backend. Errors: ctx's, ErrInvalid, ErrTurnActive,
// ErrTurnEnded (o.ID already ended), ErrSessionNotFound, ErrSessionClosed,
// ErrClosed.
func (b *Bus) StartTurn(ctx context.Context, sessionID string, o TurnOptions) (*Turn, error) {
	if err := checkName("session id", sessionID); err != nil {
		return nil, err
	}
	if o.ID == "" {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		o.ID = "turn_" + hex.EncodeToString(raw[:])
	} else if err := checkName("turn id", o.ID); err != nil {
		return nil, err
	}
	if o.Origin != "" {
		if err := checkName("origin", o.Origin); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := &Turn{bus: b, id: o.ID, session: sessionID, origin: o.Origin, endc: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	t.ctx = turnContext{t.ctx, ctx}
	r := b.turnRecord(sessionID, frame.TypeTurnStart, frame.TurnData{Turn: o.ID, Session: sessionID}, o.Origin)
	defer b.idx.flush()
	if err := b.st.startTurn(ctx, t, r); err != nil {
		t.cancel(err)
		return nil, err
	}
	t.mu.Lock()
	if !t.ended {
		t.watch = context.AfterFunc(ctx, t.parentEnded)
	}
	t.mu.Unlock()
	return t, nil
}

// turnContext is a turn's context: cancelled by the bus (a context of its
// own, so that ending the turn leaves nothing registered with the parent),
// with the parent's values and deadline.
type turnContext struct {
	context.Context
	parent context.Context
}

func (c turnContext) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

// turnRecord makes a turn record for session.
func (b *Bus) turnRecord(session, typ string, d any, origin string) *record {
	return &record{Session: session, Type: typ, Data: mustJSON(d), Ext: extOf(origin, 0), Nanos: b.nowNanos()}
}

// ID returns the turn's id.
func (t *Turn) ID() string { return t.id }

// Context returns the turn's context: done once a cancel was applied to
// the turn, StartTurn's context ended, the session closed or the bus
// closed (context.Cause says which), never by an End of the producer's
// own. It carries the values of StartTurn's context.
func (t *Turn) Context() context.Context { return t.ctx }

// Start returns the turn_start event, with its id and session: subscribe
// from Start().ID-1 to read the turn from its start.
func (t *Turn) Start() Event { return t.start }

// Publish publishes an event of the turn to its session, as [Bus.Publish]
// with [Existing] does (opts too). Once the turn has ended it fails with
// ErrTurnEnded and stores nothing: in process no event of the turn
// follows its turn_end (over a backend, one racing an end on another
// node can). Errors: Publish's, and ErrTurnEnded.
func (t *Turn) Publish(typ string, data any, opts ...PublishOption) (Event, error) {
	if err := checkEvent(t.session, typ); err != nil {
		return Event{}, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, err
	}
	if t.isEnded() {
		return Event{}, t.endedErr()
	}
	origin, _, p := publishOpts(opts)
	if p != nil {
		if err := checkName("producer id", p.ID); err != nil {
			return Event{}, err
		}
	}
	if origin == "" {
		origin = t.origin
	}
	r := &record{Type: typ, Data: raw, Ext: extOf(origin, 0), Nanos: t.bus.nowNanos()}
	defer t.bus.idx.flush()
	return t.bus.st.publishInTurn(t, r, p)
}

// SetStatus sets the agent status of the turn's session, as
// [Bus.SetStatus] does; ErrTurnEnded once the turn has ended.
func (t *Turn) SetStatus(status string) error {
	if t.isEnded() {
		return t.endedErr()
	}
	return t.bus.SetStatus(t.session, status)
}

// End ends the turn and returns its turn_end event: reason complete for
// a nil err, error with err's text as the message otherwise. The turn
// ends once: when it has ended already (a cancel, its context, the bus
// closing — or an earlier End), End returns that end and nil. It does not
// cancel the context. Errors (the turn has not ended; End may be called
// again): ErrClosed; over a backend, the backend's.
func (t *Turn) End(err error) (Event, error) {
	if ev, ok := t.endEvent(); ok {
		return ev, nil
	}
	d := frame.TurnData{Turn: t.id, Reason: frame.ReasonComplete}
	if err != nil {
		d.Reason, d.Message = frame.ReasonError, capMessage(err.Error())
	}
	return t.bus.endTurn(t, d)
}

// maxMessage bounds a turn_end's message, in bytes.
const maxMessage = 1024

// capMessage cuts s to maxMessage bytes at a character boundary.
func capMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	i := maxMessage
	for i > 0 && s[i]&0xc0 == 0x80 {
		i--
	}
	return s[:i]
}

// endTurn writes t's turn_end d unless t ended meanwhile; either way it
// returns t's end.
func (b *Bus) endTurn(t *Turn, d frame.TurnData) (Event, error) {
	r := b.turnRecord(t.session, frame.TypeTurnEnd, d, t.origin)
	defer b.idx.flush()
	ev, err := b.st.endTurn(t, r)
	if err != nil {
		if ev, ok := t.endEvent(); ok {
			return ev, nil // ended meanwhile (its session closed, the bus closed)
		}
		return Event{}, err
	}
	return ev, nil
}

// parentEnded ends the turn with reason cancelled when StartTurn's context
// ends first.
func (t *Turn) parentEnded() {
	_, _ = t.bus.endTurn(t, frame.TurnData{Turn: t.id, Reason: frame.ReasonCancelled, Message: capMessage(context.Cause(t.ctx.(turnContext).parent).Error())})
}

// isEnded reports whether t has ended; endEvent returns its end.
func (t *Turn) isEnded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

func (t *Turn) endEvent() (Event, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.end, t.ended
}

func (t *Turn) endedErr() error {
	return fmt.Errorf("%w: turn %q of session %q", ErrTurnEnded, t.id, t.session)
}

// finish records t's end ev (reason r) once: the watch of StartTurn's
// context stops, the bus forgets t, and for a cancel or a lost producer
// the context is cancelled with cause. It takes t.mu only: the store
// calls it with its locks held.
func (t *Turn) finish(ev Event, reason string, cause error) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	t.ended, t.end = true, ev
	close(t.endc)
	watch := t.watch
	t.mu.Unlock()
	if watch != nil {
		watch()
	}
	t.bus.turns.owned.Delete(turnKey{t.session, t.id})
	if reason == frame.ReasonCancelled || reason == frame.ReasonProducerLost {
		t.cancel(cause)
	}
}

// Cancel writes a turn_cancel record d to session sessionID and cancels
// d.Turn (empty: the active turns; d.Cascade: descendants' too), returning
// their ids; a turn not started yet is held for [Options.CancelHold].
// Errors, nothing written: ErrInvalid, ErrTurnEnded, the session errors,
// ErrClosed, ctx's. Over a backend it waits for the record to be stored.
func (b *Bus) Cancel(ctx context.Context, sessionID string, d frame.TurnData) (CancelResult, error) {
	if err := checkName("session id", sessionID); err != nil {
		return CancelResult{}, err
	}
	if d.Turn != "" {
		if err := checkName("turn id", d.Turn); err != nil {
			return CancelResult{}, err
		}
	}
	if d.By != "" {
		if err := checkName("cancel's By", d.By); err != nil {
			return CancelResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return CancelResult{}, err
	}
	r := b.turnRecord(sessionID, frame.TypeTurnCancel, d, d.By)
	defer b.idx.flush()
	return b.st.cancelTurns(ctx, sessionID, d, r)
}

// Turn returns turn turnID of session sessionID — with turnID "", its
// active turn — and true: active, or ended (then with EndID, Reason and
// Message). A session remembers its max(32, ReplayBufferSize) most
// recently ended turns — every turn whose turn_end its replay buffer
// holds, and the same turns on every node — whatever ClearReplayBuffer
// does. It is false when the session has no such turn (never started
// there, forgotten, or for "" no active one) or is unknown. It waits only
// for a publish to the session's tree.
func (b *Bus) Turn(sessionID, turnID string) (frame.TurnData, bool) {
	var out frame.TurnData
	ok := b.readTurns(sessionID, func(x *session) bool {
		var tn *store.Turn
		if turnID == "" {
			tn = x.ActiveTurn()
		} else if tn = x.ActiveTurnByID(turnID); tn == nil {
			tn = x.EndedTurn(turnID)
		}
		if tn != nil {
			out = turnData(x, tn)
		}
		return tn != nil
	})
	return out, ok
}

// readTurns runs fn on session id under its tree's lock; false when the
// bus does not know id (or is closed).
func (b *Bus) readTurns(id string, fn func(x *session) bool) bool {
	tok := b.hist.RLock()
	defer b.hist.RUnlock(tok)
	x, ok := b.hist.Lookup(id)
	if !ok || b.hist.Closed() {
		return false
	}
	tl := x.TreeLock()
	tl.Lock()
	defer tl.Unlock()
	return fn(x)
}

// turnData is what Turn reports of tn.
func turnData(x *session, tn *store.Turn) frame.TurnData {
	d := frame.TurnData{Turn: tn.ID, Session: x.ID, StartID: tn.StartID}
	if tn.EndID != 0 {
		d.EndID, d.Reason, d.Message = tn.EndID, tn.Reason, tn.Message
	}
	return d
}

// initTurns sets up the bus's turns and presence (newBus): mem is the
// local store, fed the store over a backend (nil in memory).
func (b *Bus) initTurns(mem *memStore, fed *fedStore) {
	tk := &b.turns
	tk.owned = xsync.NewMapOf[turnKey, *Turn]()
	tk.hold, tk.lease = int64(b.cfg.CancelHold), b.cfg.TurnLease
	tk.mem, tk.fed = mem, fed
	tk.hub = &presenceHub{grace: b.cfg.PresenceGrace, now: b.cfg.now}
	b.idx.hub = tk.hub
	if fed != nil {
		if lb := fed.lease(); lb != nil {
			tk.hub.share = newPresenceShare(lb, b.cfg.TurnLease, mem, b.ttl.stop)
		}
	}
}
