package eventbus

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Presence: who is attached to a session and what its agent is doing.
// It is state, not history: nothing of it is stored in the log, and its
// frames have no id. Each session has one presence (subs.pres), made at
// its first subscriber, status or turn; every subscription made on the
// session joins it when it registers and leaves it when it unregisters
// (index.go), under the lock that guards the session's lists. A client
// id's last subscription leaves after Options.PresenceGrace, so a
// reconnect within it changes nothing. Over a backend with leases
// (lease.go) every node shares its part and merges the others'.
//
// Lock order: a session's tree lock (or the structure lock) → presence.mu
// → the hub's mu → Subscription.mu of a listener (a frame is queued for
// it as a targeted frame is).

// maxStatusLen bounds an agent status, in bytes.
const maxStatusLen = 64

// statusIdle is the status of a session whose agent has not set one, or
// whose last turn ended.
const statusIdle = "idle"

// presenceMember is how a subscription takes part in presence: the client
// id it attaches as ("" anonymous) and whether it receives presence
// frames. Nil for an anonymous subscription that does not listen.
type presenceMember struct {
	client string
	listen bool
}

// presenceHub is the bus's side of presence: the grace, the counter of
// changes, the presences with a leave pending (stopped by Close), and
// over a backend the nodes' shared parts.
type presenceHub struct {
	grace   time.Duration
	now     func() time.Time
	changes atomic.Uint64
	closed  atomic.Bool

	mu      sync.Mutex
	pending map[*presence]struct{} // presences with a grace timer running
	share   *presenceShare         // over a LeaseBackend; nil otherwise (lease.go)
}

// presence is one session's presence.
type presence struct {
	mu       sync.Mutex
	hub      *presenceHub
	session  string
	clients  map[string]*attachment // by client id
	anon     int                    // anonymous subscriptions attached
	status   string
	statusAt int64 // Unix ns of the last SetStatus here (merging nodes' statuses)
	turn     string
	// listeners get a frame per change; shown is what the last frame
	// showed, stale while nobody listens (it is not kept up to date then).
	listeners []*Subscription
	shown     presenceView
	stale     bool
	timers    int // grace timers running
}

// attachment is one client id's subscriptions; leave is its pending
// leave (the grace timer), gen tells a stale timer from the current one.
type attachment struct {
	n     int
	leave *time.Timer
	gen   uint64
}

// presenceView is the merged state a frame shows.
type presenceView struct {
	ids     map[string]struct{}
	clients int
	status  string
	turn    string
}

// presenceOf returns x's presence, made when x has none yet. The caller
// holds x's tree lock or the structure lock (either side: the pointer is
// set once, atomically).
func (h *presenceHub) presenceOf(x *session) *presence {
	if p := x.Subs.pres.Load(); p != nil {
		return p
	}
	p := &presence{hub: h, session: x.ID, status: statusIdle, clients: map[string]*attachment{}, stale: true}
	if tn := x.ActiveTurn(); tn != nil {
		p.turn = tn.ID
	}
	if !x.Subs.pres.CompareAndSwap(nil, p) {
		return x.Subs.pres.Load()
	}
	return p
}

// join adds s to its session's presence (index.register): a client id
// already attached, or in its grace, changes nothing; a listener gets the
// presence as its first frame. The caller holds the lock that guards s's
// lists; s is not yet visible to its reader.
func (h *presenceHub) join(s *Subscription) {
	p := h.presenceOf(s.sess)
	m := s.member
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := true
	if m != nil && m.client != "" {
		a := p.clients[m.client]
		if a == nil {
			a = &attachment{}
			p.clients[m.client] = a
		} else {
			changed = false // attached already, or back within its grace
		}
		a.n++
		if a.leave != nil {
			a.leave.Stop()
			a.leave = nil
			a.gen++
			p.timerDoneLocked()
		}
	} else {
		p.anon++
	}
	if changed {
		p.changedLocked(true)
	}
	if m != nil && m.listen {
		if p.stale {
			p.shown, p.stale = p.viewLocked(), false
		}
		p.listeners = append(p.listeners, s)
		s.lead = append(s.lead, p.entryLocked(p.shown, nil, nil))
	}
}

// leave removes s from its session's presence (index.unregister): a
// client id's last subscription leaves after the grace.
func (h *presenceHub) leave(s *Subscription) {
	p := s.sess.Subs.pres.Load()
	if p == nil {
		return
	}
	m := s.member
	p.mu.Lock()
	defer p.mu.Unlock()
	if m != nil && m.listen {
		if i := slices.Index(p.listeners, s); i >= 0 {
			p.listeners = slices.Delete(p.listeners, i, i+1)
		}
	}
	if m == nil || m.client == "" {
		p.anon--
		p.changedLocked(true)
		return
	}
	a := p.clients[m.client]
	if a == nil {
		return
	}
	if a.n--; a.n > 0 {
		return
	}
	if h.grace <= 0 || h.closed.Load() {
		delete(p.clients, m.client)
		p.changedLocked(true)
		return
	}
	a.gen++
	gen, c := a.gen, m.client
	a.leave = time.AfterFunc(h.grace, func() { p.graceOver(c, gen) })
	if p.timers++; p.timers == 1 {
		h.mu.Lock()
		if h.pending == nil {
			h.pending = map[*presence]struct{}{}
		}
		h.pending[p] = struct{}{}
		h.mu.Unlock()
	}
}

// graceOver is a client's grace timer: it leaves unless it came back.
func (p *presence) graceOver(client string, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.clients[client]
	if a == nil || a.gen != gen || a.leave == nil {
		return
	}
	a.leave = nil
	p.timerDoneLocked()
	if a.n > 0 || p.hub.closed.Load() {
		return
	}
	delete(p.clients, client)
	p.changedLocked(true)
}

// timerDoneLocked counts one grace timer of p as stopped or fired.
func (p *presence) timerDoneLocked() {
	if p.timers--; p.timers == 0 {
		p.hub.mu.Lock()
		delete(p.hub.pending, p)
		p.hub.mu.Unlock()
	}
}

// stop stops every grace timer (Bus.Close).
func (h *presenceHub) stop() {
	h.closed.Store(true)
	h.mu.Lock()
	ps := slices.Collect(maps.Keys(h.pending))
	h.pending = nil
	h.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		for _, a := range p.clients {
			if a.leave != nil {
				a.leave.Stop()
				a.leave = nil
			}
		}
		p.timers = 0
		p.mu.Unlock()
	}
}

// turnChanged sets the active turn of x's presence: turn started, or (end)
// turn ended — then the status returns to idle. The caller holds x's tree
// lock or the structure lock.
func (h *presenceHub) turnChanged(x *session, turn string, end bool) {
	p := h.presenceOf(x)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !end:
		p.turn = turn
	case p.turn == turn:
		p.turn = ""
		if p.status != statusIdle {
			p.status, p.statusAt = statusIdle, h.now().UnixNano()
			p.changedLocked(true)
			return
		}
	}
	p.changedLocked(false)
}

// setStatus sets the agent status of x's presence.
func (h *presenceHub) setStatus(x *session, status string) {
	p := h.presenceOf(x)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == status {
		return
	}
	p.status, p.statusAt = status, h.now().UnixNano()
	p.changedLocked(true)
}

// viewLocked is p's state merged with the other nodes' parts.
func (p *presence) viewLocked() presenceView {
	v := presenceView{ids: make(map[string]struct{}, len(p.clients)), clients: p.anon, status: p.status, turn: p.turn}
	for c := range p.clients {
		v.ids[c] = struct{}{}
	}
	if sh := p.hub.share; sh != nil {
		sh.merge(p.session, &v, p.statusAt)
	}
	v.clients += len(v.ids)
	return v
}

// changedLocked compares p's state with what its listeners were shown
// and sends them a frame when it differs; local says this node's own
// part changed (shared with the other nodes over a backend).
func (p *presence) changedLocked(local bool) {
	if local && p.hub.share != nil {
		p.hub.share.dirty(p.session, p.partLocked())
	}
	if len(p.listeners) == 0 {
		// Nobody to show it to: the view is built when a listener joins.
		p.stale = true
		p.hub.changes.Add(1)
		return
	}
	v := p.viewLocked()
	var joined, left []string
	for c := range v.ids {
		if _, ok := p.shown.ids[c]; !ok {
			joined = append(joined, c)
		}
	}
	for c := range p.shown.ids {
		if _, ok := v.ids[c]; !ok {
			left = append(left, c)
		}
	}
	if len(joined) == 0 && len(left) == 0 && v.clients == p.shown.clients && v.status == p.shown.status && v.turn == p.shown.turn {
		return
	}
	slices.Sort(joined)
	slices.Sort(left)
	p.shown = v
	p.hub.changes.Add(1)
	e := p.entryLocked(v, joined, left)
	for _, s := range p.listeners {
		// A frame that does not fit a full queue is skipped: the next
		// one carries the whole state again.
		_ = s.deliverTargeted(e.Rec)
	}
}

// entryLocked is the presence frame of view v with joined and left.
func (p *presence) entryLocked(v presenceView, joined, left []string) entry {
	return synth(p.session, frame.TypePresence, frame.PresenceData{
		Session: p.session, Clients: v.clients, Status: v.status, Turn: v.turn, Joined: joined, Left: left,
	}, p.hub.now().UnixNano())
}

// data is p's state as Bus.Presence reports it.
func (p *presence) data() frame.PresenceData {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.viewLocked()
	return frame.PresenceData{Session: p.session, Clients: v.clients, Status: v.status, Turn: v.turn}
}

// SetStatus sets the agent status of session sessionID (1–64 bytes of
// letters, digits and _ . : -), carried by presence frames; it returns to
// idle when a turn ends. Errors: ErrInvalid, ErrSessionNotFound,
// ErrSessionClosed, ErrClosed.
func (b *Bus) SetStatus(sessionID, status string) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkStatus(status); err != nil {
		return err
	}
	return b.inSession(sessionID, func(x *session) { b.idx.hub.setStatus(x, status) })
}

// Presence returns the presence of session sessionID: the clients
// attached, the agent status and the active turn (Joined and Left are
// empty). Errors: ErrInvalid for a bad id; ErrSessionNotFound,
// ErrSessionClosed, ErrClosed.
func (b *Bus) Presence(sessionID string) (frame.PresenceData, error) {
	if err := checkName("session id", sessionID); err != nil {
		return frame.PresenceData{}, err
	}
	var p *presence
	if err := b.inSession(sessionID, func(x *session) { p = b.idx.hub.presenceOf(x) }); err != nil {
		return frame.PresenceData{}, err
	}
	return p.data(), nil
}

// inSession runs fn on session id under its tree's lock.
func (b *Bus) inSession(id string, fn func(x *session)) error {
	tok := b.hist.RLock()
	defer b.hist.RUnlock(tok)
	x, err := b.turns.mem.lookup(id)
	if err != nil {
		return err
	}
	tl := x.TreeLock()
	tl.Lock()
	defer tl.Unlock()
	fn(x)
	return nil
}

// checkStatus refuses a status that is empty, longer than maxStatusLen
// or has a character outside [A-Za-z0-9_.:-].
func checkStatus(s string) error {
	if s == "" || len(s) > maxStatusLen {
		return invalidf("status %.80q is %d bytes (want 1 to %d)", s, len(s), maxStatusLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return invalidf("status %q: character %q not in [A-Za-z0-9_.:-]", s, c)
		}
	}
	return nil
}
