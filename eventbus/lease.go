package eventbus

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// Turns and presence over a backend. The records cross nodes like any
// event, and every node's feed applies them to its store as a publish in
// memory does (fed.go: Ingest, turnstore.go). What a node holds that is
// not history — the turns it runs, its part of each session's presence —
// lives under a lease when the backend has one (LeaseBackend, consumed by
// NewWithBackend): a node that dies without a goodbye has its turns ended
// for it (turn_end{producer_lost}, by whichever node learns it first; a
// second end is never stored) and its clients leave.

// nodePart is one node's part of a session's presence, as it shares it.
type nodePart struct {
	Clients  []string `json:"clients,omitempty"`
	Anon     int      `json:"anon,omitempty"`
	Status   string   `json:"status,omitempty"`
	StatusAt int64    `json:"statusAt,omitempty"`
}

// partLocked is p's own part. p.mu is held.
func (p *presence) partLocked() nodePart {
	part := nodePart{Anon: p.anon, Status: p.status, StatusAt: p.statusAt}
	for c := range p.clients {
		part.Clients = append(part.Clients, c)
	}
	return part
}

// presenceShare is presence over a LeaseBackend: the other nodes' parts,
// and this node's parts waiting to be shared by the sharer goroutine
// (one at a time per session, the newest).
type presenceShare struct {
	be    backend.LeaseBackend
	lease time.Duration
	mem   *memStore

	mu     sync.Mutex
	remote map[string]map[string]nodePart // session → node → part
	out    map[string][]byte              // session → this node's newest part, not yet shared (nil: drop it)
	shared map[string]bool                // sessions this node has shared a part of
	kick   chan struct{}
	stop   <-chan struct{}
	done   chan struct{}
}

func newPresenceShare(be backend.LeaseBackend, lease time.Duration, mem *memStore, stop <-chan struct{}) *presenceShare {
	sh := &presenceShare{be: be, lease: lease, mem: mem, remote: map[string]map[string]nodePart{},
		out: map[string][]byte{}, shared: map[string]bool{}, kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go sh.run()
	return sh
}

// dirty queues this node's part of session to be shared.
func (sh *presenceShare) dirty(session string, part nodePart) {
	b, _ := json.Marshal(part)
	sh.mu.Lock()
	sh.out[session] = b
	sh.shared[session] = true
	sh.mu.Unlock()
	sh.wake()
}

// gone queues the drop of this node's part of session (it closed or
// expired here), if it shared one.
func (sh *presenceShare) gone(session string) {
	sh.mu.Lock()
	if !sh.shared[session] {
		sh.mu.Unlock()
		return
	}
	delete(sh.shared, session)
	sh.out[session] = nil
	sh.mu.Unlock()
	sh.wake()
}

func (sh *presenceShare) wake() {
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// run shares the queued parts until the bus closes. A share in flight
// then is cancelled: the backend's Close drops the node's parts (or they
// expire with its lease), and Close must not wait out a reply that a cut
// connection lost.
func (sh *presenceShare) run() {
	defer close(sh.done)
	closing, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	go func() {
		select {
		case <-sh.stop:
			cancelAll()
		case <-closing.Done():
		}
	}()
	for {
		select {
		case <-sh.stop:
			return
		case <-sh.kick:
		}
		sh.mu.Lock()
		out := sh.out
		sh.out = map[string][]byte{}
		sh.mu.Unlock()
		for session, part := range out {
			ctx, cancel := context.WithTimeout(closing, backendTimeout)
			_ = sh.be.SharePresence(ctx, session, part, sh.lease) // the next change shares it again
			cancel()
		}
	}
}

// merge adds the other nodes' parts of session to v: their client ids and
// anonymous subscribers, and their status when set later than this
// node's (at Unix ns at).
func (sh *presenceShare) merge(session string, v *presenceView, at int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, part := range sh.remote[session] {
		for _, c := range part.Clients {
			v.ids[c] = struct{}{}
		}
		v.clients += part.Anon
		if part.Status != "" && part.StatusAt > at {
			v.status, at = part.Status, part.StatusAt
		}
	}
}

// Presence is Feed.Presence: node's part of session, nil when it went.
func (f *fedStore) Presence(node, session string, part []byte) {
	sh := f.local.tk.hub.share
	if sh == nil {
		return
	}
	var np nodePart
	if part != nil && json.Unmarshal(part, &np) != nil {
		return
	}
	sh.mu.Lock()
	if part == nil {
		delete(sh.remote[session], node)
		if len(sh.remote[session]) == 0 {
			delete(sh.remote, session)
		}
	} else {
		if sh.remote[session] == nil {
			sh.remote[session] = map[string]nodePart{}
		}
		sh.remote[session][node] = np
	}
	sh.mu.Unlock()
	if x, ok := f.h.Lookup(session); ok {
		if p := x.Subs.pres.Load(); p != nil {
			p.mu.Lock()
			p.changedLocked(false)
			p.mu.Unlock()
		}
	}
}

// TurnLost is Feed.TurnLost: the lease of turn of session expired; unless
// the turn has ended, this node writes its turn_end{producer_lost}. It
// first lets the feed catch up with the backend (bounded by
// backendTimeout), so that a turn_start this node has not yet ingested
// is not taken for a turn that never started.
func (f *fedStore) TurnLost(session, turn string) {
	f.local.tk.spawn(func() {
		_ = f.await(context.Background(), math.MaxUint64) // bounded: backendTimeout, Close
		f.h.Lock()
		x := f.h.Get(session)
		var path []string
		if x != nil && !f.h.Closed() && x.ActiveTurnByID(turn) != nil {
			path = x.Path()
		}
		f.h.Unlock()
		if path == nil {
			return
		}
		ev := Event{Session: session, Type: frame.TypeTurnEnd, Time: f.local.now(),
			Data: mustJSON(frame.TurnData{Turn: turn, Reason: frame.ReasonProducerLost, Message: "lease expired"})}
		_, _ = f.append(path, ev) // a second end (another node's) is not stored
	})
}

// lease returns f's backend as a LeaseBackend, nil when it is none.
func (f *fedStore) lease() backend.LeaseBackend {
	lb, _ := f.be.(backend.LeaseBackend)
	return lb
}

// turnPath returns session id's path and runs check on it under its
// tree's lock. A session this node does not know is ErrSessionNotFound.
func (f *fedStore) turnPath(id string, check func(x *session) error) ([]string, error) {
	path, err := f.target(id, false)
	if err != nil {
		return nil, err
	}
	if check != nil {
		err = f.local.inTree(id, func(x *session, _ *fan) error { return check(x) })
	}
	return path, err
}

// startTurn is store.startTurn over a backend: the turn's lease is taken,
// turn_start appended, and StartTurn waits until the feed brought it
// back: stored, it started the turn — or it was not stored: another
// node's turn started first (ErrTurnActive), or a turn of its id ended
// first (ErrTurnEnded).
func (f *fedStore) startTurn(ctx context.Context, t *Turn, r *record) error {
	path, err := f.turnPath(t.session, func(x *session) error { return refusal(x, r, t.id) })
	if err != nil {
		return err
	}
	tk := f.local.tk
	lb := f.lease()
	if lb != nil {
		if err := lb.HoldTurn(ctx, t.session, t.id, tk.lease); err != nil {
			return fmt.Errorf("%w: turn lease: %w", ErrBackend, err)
		}
	}
	key := turnKey{t.session, t.id}
	tk.owned.Store(key, t) // before the append: a held cancel applies when the feed brings it
	ev, err := f.append(path, eventOf(r, false))
	if err == nil {
		t.start = ev
		_ = f.await(ctx, ev.ID)
		err = f.local.inTree(t.session, func(x *session, _ *fan) error {
			tn := x.ActiveTurnByID(t.id)
			if tn == nil {
				tn = x.EndedTurn(t.id)
			}
			switch {
			case tn != nil && tn.StartID == ev.ID:
				return nil
			case f.h.LastID() >= ev.ID:
				if a := x.ActiveTurn(); a != nil {
					return fmt.Errorf("%w: session %q has turn %q", ErrTurnActive, x.ID, a.ID)
				}
				if tn != nil && tn.EndID != 0 {
					// Its id was a turn's whose end reached the log first.
					return fmt.Errorf("%w: turn %q of session %q (a turn id is used once)", ErrTurnEnded, t.id, x.ID)
				}
				return fmt.Errorf("%w: session %q", ErrTurnActive, x.ID)
			}
			return nil // not yet ingested (the feed is behind): the turn runs
		})
	}
	if err != nil {
		tk.owned.Delete(key)
		if lb != nil {
			_ = lb.ReleaseTurn(context.Background(), t.session, t.id)
		}
	}
	return err
}

// endTurn is store.endTurn over a backend: turn_end is appended, and End
// waits for the feed to bring it back, so that it returns the end that
// was stored — another node's (producer_lost) when that came first.
func (f *fedStore) endTurn(t *Turn, r *record) (Event, error) {
	path, err := f.turnPath(t.session, nil)
	if err != nil {
		return Event{}, err
	}
	ev, err := f.append(path, eventOf(r, false))
	if err != nil {
		return Event{}, err
	}
	_ = f.await(context.Background(), ev.ID)
	if f.cancelFirst(t) {
		// A cancel reached the turn before this end, which the log
		// refused: the end this node writes for the cancel is the turn's.
		select {
		case <-t.endc:
		case <-time.After(backendTimeout):
		case <-f.stop:
		}
	}
	if end, ok := t.endEvent(); ok {
		return end, nil
	}
	// The feed is behind: this end is the turn's as far as this node knows.
	d, _ := decodeTurnData(r)
	t.finish(ev, d.Reason, fmt.Errorf("%w: turn %q ended: %s", context.Canceled, t.id, d.Reason))
	f.local.tk.release(t)
	end, _ := t.endEvent() // ev, or the end the feed brought meanwhile
	return end, nil
}

// cancelFirst reports whether t is still active here with a cancel
// applied to it (an end other than cancelled is then refused).
func (f *fedStore) cancelFirst(t *Turn) bool {
	var yes bool
	_ = f.local.inTree(t.session, func(x *session, _ *fan) error {
		tn := x.ActiveTurnByID(t.id)
		yes = tn != nil && tn.StartID == t.start.ID && tn.Cancel != 0
		return nil
	})
	return yes
}

// cancelTurns is store.cancelTurns over a backend: turn_cancel is
// appended, and Cancel waits until this node's feed has it; every node
// applies it, and the node that runs a cancelled turn ends it. The result
// is what this node's state says the cancel does.
func (f *fedStore) cancelTurns(ctx context.Context, id string, d frame.TurnData, r *record) (CancelResult, error) {
	res := CancelResult{Cancelled: []string{}, Held: []string{}}
	path, err := f.turnPath(id, func(x *session) error {
		if d.Turn != "" && x.ActiveTurnByID(d.Turn) == nil {
			if x.EndedTurn(d.Turn) != nil {
				return fmt.Errorf("%w: turn %q of session %q", ErrTurnEnded, d.Turn, x.ID)
			}
			res.Held = append(res.Held, d.Turn)
		}
		for _, c := range x.ActiveTurns(d.Cascade, nil) {
			if d.Turn == "" || c.Session != x || c.Turn.ID == d.Turn {
				res.Cancelled = append(res.Cancelled, c.Turn.ID)
			}
		}
		return nil
	})
	if err != nil {
		return CancelResult{}, err
	}
	ev, err := f.append(path, eventOf(r, false))
	if err != nil {
		return CancelResult{}, err
	}
	_ = f.await(ctx, ev.ID)
	return res, ctx.Err()
}

// publishInTurn is store.publishInTurn over a backend: refused once this
// node knows the turn ended.
func (f *fedStore) publishInTurn(t *Turn, r *record, p *producer.Stamp) (Event, error) {
	if t.isEnded() {
		return Event{}, t.endedErr()
	}
	return f.publish(t.session, r, false, p)
}

// decodeTurnData decodes a turn record's payload.
func decodeTurnData(r *record) (frame.TurnData, error) {
	var d frame.TurnData
	err := json.Unmarshal(r.Data, &d)
	return d, err
}

// endLater writes t's turn_end with reason and message from a goroutine
// of its own (the caller holds a bus lock; the append is the backend's).
func (tk *turnKeeper) endLater(t *Turn, reason, message string) {
	tk.spawn(func() {
		_, _ = t.bus.endTurn(t, frame.TurnData{Turn: t.id, Reason: reason, Message: message})
	})
}

// spawn runs fn on a goroutine that Close waits for, unless Close has
// begun to wait (then the backend is closing: fn is skipped).
func (tk *turnKeeper) spawn(fn func()) {
	tk.gmu.Lock()
	defer tk.gmu.Unlock()
	if tk.closing {
		return
	}
	tk.wg.Add(1)
	go func() {
		defer tk.wg.Done()
		fn()
	}()
}

// release drops t's lease, from a goroutine of its own.
func (tk *turnKeeper) release(t *Turn) {
	lb := tk.fed.lease()
	if lb == nil {
		return
	}
	tk.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), backendTimeout)
		defer cancel()
		_ = lb.ReleaseTurn(ctx, t.session, t.id)
	})
}

// goodbye ends the turns this node runs as the bus closes over a
// backend: turn_end{producer_lost} appended for each, before the backend
// closes, so that no other node has to wait for the lease. The appends run
// side by side: with the backend unreachable each waits out its timeout,
// and Close should wait that once, not once per turn.
func (tk *turnKeeper) goodbye() {
	if tk.fed == nil {
		return
	}
	var wg sync.WaitGroup
	tk.owned.Range(func(_ turnKey, t *Turn) bool {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = t.bus.endTurn(t, frame.TurnData{Turn: t.id, Reason: frame.ReasonProducerLost, Message: "bus closed"})
		}()
		return true
	})
	wg.Wait()
}
