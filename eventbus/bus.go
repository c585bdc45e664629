package eventbus

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/replay"
	"github.com/replaybus/replaybus/scope"
)

// MaxNameLen is the longest session id or event type the bus accepts, in bytes.
const MaxNameLen = 256

// Bus is an in-memory, per-session event bus with a bounded replay buffer per
// session, the Go form of AgentPool's EventBus with qwen-code's resume and
// backpressure protocol. Create one with [New]; the zero value is not usable.
//
// All methods are safe for concurrent use. Publish, CreateSession,
// CloseSession and Subscribe serialise on one bus-wide lock that assigns the
// sequence, appends to the replay buffer and queues the event for every
// matching subscriber; none of them waits on a subscriber.
type Bus struct {
	cfg       config.Config
	opts      options
	epoch     string
	droppable map[string]struct{}

	backend Backend // nil for the in-memory bus
	// feedWaiters are subscribes waiting for the backend feed (Syncer);
	// guarded by mu.
	feedWaiters []feedWaiter

	mu        sync.Mutex
	closed    bool
	nextID    uint64 // the id the next event gets (in-memory) or the next expected from the feed
	highWater uint64 // highest id a backend acknowledged to this node
	nextSub   uint64
	tree      scope.Tree[*session]
	all       subList
	nsubs     int
	allLost   uint64 // highest id lost with any closed or expired session
	// lost remembers, for one session TTL, the newest id each closed or
	// expired session took with it; forgotten is the highest such id whose
	// entry has been dropped since. A re-created id is seeded from them.
	lost      map[string]lostMark
	forgotten uint64
	tombs     map[string]int64 // closed session id → Unix ns of closing
	stats     Stats
	stopTTL   chan struct{}
	ttlDone   chan struct{}
	guarded   atomic.Int64
	replayed  atomic.Int64
	diag      diagState // diagnostics queued under mu, delivered after (diaglog.go)
}

// New returns a running Bus configured by cfg (zero fields take their
// defaults, see [config.Config]) and opts. It validates everything up front
// and returns an error naming the bad field and value. The bus starts one
// goroutine that expires idle sessions; [Bus.Close] stops it.
func New(cfg config.Config, opts ...Option) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	b := &Bus{cfg: cfg, nextID: 1, tombs: make(map[string]int64)}
	for _, o := range opts {
		o(&b.opts)
	}
	if b.opts.now == nil {
		b.opts.now = time.Now
	}
	b.epoch = b.opts.epoch
	if b.epoch == "" {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		b.epoch = hex.EncodeToString(raw[:])
	} else if err := checkEpoch(b.epoch); err != nil {
		return nil, err
	}
	for _, t := range cfg.DroppableTypes {
		if b.droppable == nil {
			b.droppable = make(map[string]struct{})
		}
		b.droppable[t] = struct{}{}
	}
	b.stopTTL, b.ttlDone = make(chan struct{}), make(chan struct{})
	go b.expireLoop()
	return b, nil
}

func checkEpoch(e string) error {
	if len(e) == 0 || len(e) > 64 {
		return invalidf("epoch %q must be 1-64 characters", e)
	}
	for _, c := range []byte(e) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return invalidf("epoch %q: character %q not in [A-Za-z0-9_]", e, c)
		}
	}
	return nil
}

// Epoch returns this bus incarnation's epoch: 16 random hex digits unless set
// with [WithEpoch]. A client cursor from another epoch is an epoch_reset.
func (b *Bus) Epoch() string { return b.epoch }

// Config returns the configuration in force, defaults applied.
func (b *Bus) Config() config.Config { return b.cfg }

// LastEventID returns the highest id assigned so far (0 before the first
// publish), qwen-code's lastEventId getter.
func (b *Bus) LastEventID() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nextID - 1
}

func (b *Bus) nowNanos() int64 { return b.opts.now().UnixNano() }

// CheckSessionID returns nil when id is a session id the bus accepts: 1 to
// MaxNameLen bytes of valid UTF-8 without control characters. Otherwise it
// returns an ErrInvalid error that quotes the id. Adapters use it to refuse
// a bad id before they subscribe.
func CheckSessionID(id string) error { return checkName("session id", id) }

func checkName(what, v string) error {
	if v == "" {
		return invalidf("empty %s", what)
	}
	if len(v) > MaxNameLen {
		return invalidf("%s %.40q… is %d bytes, longer than %d", what, v, len(v), MaxNameLen)
	}
	if !utf8.ValidString(v) {
		return invalidf("%s %q is not valid UTF-8", what, v)
	}
	for _, c := range []byte(v) {
		if c < 0x20 || c == 0x7f {
			return invalidf("%s %q contains control character %q", what, v, c)
		}
	}
	return nil
}

// Reserved reports whether typ is one of the bus's own frame types —
// state_resync_required, replay_complete, slow_client_warning,
// client_evicted, session_closed — or starts with "_replaybus.". Publish
// refuses them, so a publisher cannot forge a protocol frame (a real event
// with an id that a client would take for the end of its session, say).
func Reserved(typ string) bool {
	switch typ {
	case TypeStateResyncRequired, TypeReplayComplete, TypeSlowClientWarning, TypeClientEvicted, TypeSessionClosed:
		return true
	}
	return strings.HasPrefix(typ, "_replaybus.")
}

// encode turns a payload into JSON once, outside the lock.
func encode(data any) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = invalidf("encoding data of type %T panicked: %v", data, p)
		}
	}()
	switch v := data.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, invalidf("data is not valid JSON: %.60q", v)
		}
		return append([]byte(nil), v...), nil
	}
	out, err = json.Marshal(data)
	if err != nil {
		return nil, invalidf("cannot encode data of type %T: %v", data, err)
	}
	return out, nil
}

// Publish stores an event of type typ with payload data in session's replay
// buffer and queues it for every subscriber whose scope covers the session
// (AgentPool's publish; qwen-code's "publish is always safe to call").
//
// data is encoded to JSON once and shared (a json.RawMessage is validated
// and copied as is; nil means no payload). The session is created as a root
// if it does not exist. It returns the stored Event with its id, from one
// bus-wide sequence that starts at 1.
//
// It never blocks on a subscriber and never panics. Errors: an ErrInvalid
// error naming the value for an empty or over-long session id or type, a
// type with a control character (CR, LF, …), a [Reserved] type (the bus's
// own frames: use CloseSession for session_closed), or data that cannot be encoded
// — a refused event consumes no id; ErrSessionClosed for a closed session;
// ErrClosed after [Bus.Close].
func (b *Bus) Publish(sessionID, typ string, data any, opts ...PublishOption) (Event, error) {
	defer b.flushDiagnostics() // after b.mu is released
	var origin string
	if len(opts) > 0 {
		opts = slices.DeleteFunc(slices.Clone(opts), func(o PublishOption) bool { return o == nil })
		// Declared here so that it moves to the heap (o(&po) makes it
		// escape) only for a publish that has options.
		var po publishOptions
		for _, o := range opts {
			o(&po)
		}
		origin = po.origin
	}
	if err := checkName("session id", sessionID); err != nil {
		return Event{}, err
	}
	if err := checkName("event type", typ); err != nil {
		return Event{}, err
	}
	if Reserved(typ) {
		return Event{}, invalidf("event type %q is reserved for the bus's own frames", typ)
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Event{}, ErrClosed
	}
	if b.backend != nil {
		// The session is known here from now on, and published: a
		// CreateSession on this node can no longer give it a parent, as in
		// memory. A closed session is refused as in memory.
		x, err := b.sessionLocked(sessionID, true)
		var path []string
		if err == nil {
			x.published = true
			path = x.pathLocked()
		}
		now := b.opts.now()
		b.mu.Unlock()
		if err != nil {
			return Event{}, err
		}
		return b.appendRemote(path, Event{Session: sessionID, Type: typ, Data: raw, Time: now, Origin: origin})
	}
	defer b.mu.Unlock()
	x, err := b.sessionLocked(sessionID, true)
	if err != nil {
		return Event{}, err
	}
	r := &record{session: x.id, typ: typ, data: raw, origin: originRef(origin), nanos: b.nowNanos()}
	b.appendLocked(x, r, false)
	return r.event(false), nil
}

// eachSubLocked calls fn for every registered subscriber.
func (b *Bus) eachSubLocked(fn func(*Subscription)) {
	b.tree.Each(func(n *scope.Node[*session]) {
		for _, s := range n.Value.own {
			fn(s)
		}
	})
	for _, s := range b.all {
		fn(s)
	}
}

// appendLocked assigns the next id, stores r and fans it out.
func (b *Bus) appendLocked(x *session, r *record, forced bool) {
	r.id = b.nextID
	b.nextID++
	x.published = true
	x.lastID = r.id
	x.touch(r.nanos)
	x.ring.Append(r)
	b.stats.Published++
	b.fanOutLocked(x, r, forced)
}

// sessionLocked returns the session, creating it as a root when create is
// set. b.mu must be held.
func (b *Bus) sessionLocked(id string, create bool) (*session, error) {
	if n := b.tree.Get(id); n != nil {
		return n.Value, nil
	}
	if _, ok := b.tombs[id]; ok {
		return nil, fmt.Errorf("%w: %q", ErrSessionClosed, id)
	}
	if !create {
		return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	return b.addLocked(id, "")
}

func (b *Bus) addLocked(id, parent string) (*session, error) {
	ring, err := replay.New[*record](b.cfg.ReplayBufferSize, recordID)
	if err != nil {
		return nil, err
	}
	// The id may have lived before (expired, or closed and its tombstone
	// forgotten): a resume from before what it lost then gets ring_evicted
	// instead of a silent gap. Within one TTL we know exactly what the id
	// lost; after that, conservatively, anything forgotten since.
	if m, ok := b.lost[id]; ok {
		ring.MarkEvicted(m.id)
	} else {
		ring.MarkEvicted(b.forgotten)
	}
	x := &session{id: id, ring: ring, active: b.nowNanos()}
	n, err := b.tree.Add(id, parent, x)
	if err != nil {
		return nil, err
	}
	x.node = n
	b.stats.Sessions++
	return x, nil
}

// CreateSession creates session id under parent ("" for a root), or gives an
// existing session that has not published yet its parent (AgentPool's
// session tree: a child session of a sub-agent). Calling it again with the
// same parent is a no-op.
//
// Errors (each naming the ids): ErrInvalid for a bad id; scope.ErrUnknownParent
// for an unknown parent; scope.ErrCycle when parent lies below id;
// ErrSessionClosed when id or parent was closed; ErrInvalid when id already
// published or already has another parent; ErrClosed after Close.
func (b *Bus) CreateSession(id, parent string) error {
	if err := checkName("session id", id); err != nil {
		return err
	}
	if parent != "" {
		if err := checkName("parent session id", parent); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if _, ok := b.tombs[id]; ok {
		return fmt.Errorf("%w: %q", ErrSessionClosed, id)
	}
	if _, ok := b.tombs[parent]; ok && parent != "" {
		return fmt.Errorf("%w: parent %q", ErrSessionClosed, parent)
	}
	n := b.tree.Get(id)
	if n == nil {
		x, err := b.addLocked(id, parent)
		if err != nil || b.backend == nil {
			return err
		}
		path := x.pathLocked()
		now := b.opts.now()
		b.mu.Unlock()
		_, err = b.appendRemote(path, Event{Session: id, Type: TypeSessionCreated, Time: now})
		b.mu.Lock()
		if err != nil && !b.closed && b.tree.Get(id) == x.node && x.nsubs == 0 && !x.published && x.node.NumChildren() == 0 {
			// No other node learnt of it: do not keep a local phantom.
			b.tree.Remove(id, false)
			b.stats.Sessions--
		}
		return err
	}
	x := n.Value
	old := x.parent()
	if old != nil && old.id == parent || old == nil && parent == "" {
		return nil
	}
	if old != nil {
		return invalidf("session %q already has parent %q, cannot move it under %q", id, old.id, parent)
	}
	if x.published {
		return invalidf("session %q has already published; its parent must be set before", id)
	}
	if err := b.tree.SetParent(id, parent); err != nil {
		return err
	}
	b.reparentLocked(x, nil, x.parent())
	return nil
}

// SessionExists reports whether session id exists (created and neither
// closed nor expired).
func (b *Bus) SessionExists(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tree.Get(id) != nil
}

// SessionInfo describes one session for listings.
type SessionInfo struct {
	ID          string `json:"id"`               // the session id
	Parent      string `json:"parent,omitempty"` // its parent's id, "" for a root
	Subscribers int    `json:"subscribers"`      // subscribers made on it (any scope)
	Buffered    int    `json:"buffered"`         // events in its replay buffer
	LastEventID uint64 `json:"lastEventId"`      // newest id published to it, 0 if none
}

// Sessions lists every live session, in no particular order. It costs
// O(sessions) under the bus lock.
func (b *Bus) Sessions() []SessionInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]SessionInfo, 0, b.tree.Len())
	b.tree.Each(func(n *scope.Node[*session]) {
		x := n.Value
		info := SessionInfo{ID: x.id, Subscribers: x.nsubs, Buffered: x.ring.Len(), LastEventID: x.lastID}
		if p := x.parent(); p != nil {
			info.Parent = p.id
		}
		out = append(out, info)
	})
	return out
}

// SubscriberCounts returns the number of subscribers made on each session
// that has any, as AgentPool's get_subscriber_counts.
func (b *Bus) SubscriberCounts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int)
	b.tree.Each(func(n *scope.Node[*session]) {
		if n.Value.nsubs > 0 {
			out[n.ID] = n.Value.nsubs
		}
	})
	return out
}

// ClearReplayBuffer empties session id's replay buffer, as AgentPool's
// clear_replay_buffer. The cleared ids count as evicted: a later resume from
// before them gets ring_evicted. Errors: ErrSessionNotFound, ErrClosed.
func (b *Bus) ClearReplayBuffer(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	x, err := b.sessionLocked(id, false)
	if err != nil {
		return err
	}
	x.ring.Clear()
	return nil
}

// CloseSession closes session id (AgentPool's close_session): it publishes a
// session_closed event (a real event with an id) that every subscriber in
// scope receives even when its queue is full, ends the session's own
// subscribers once they have drained (their Err is ErrSessionClosed), frees
// its replay buffer and removes it from the tree; its children become roots.
// Subscribers of other sessions that heard it (descendants, subtree, all)
// receive session_closed and go on. Later publishes and subscribes to id fail
// with ErrSessionClosed for the session TTL (AgentPool silently re-creates
// the buffer; we refuse, so a late publish cannot resurrect a closed
// session).
//
// Closing a closed session is a no-op (nil). Errors: ErrSessionNotFound for
// an id that never existed, ErrClosed after Close.
func (b *Bus) CloseSession(id string) error { return b.closeSession(id, false) }

// CloseSessionTree closes session id and, depth first, every session below
// it, each as [Bus.CloseSession] does (children first, so each child's
// session_closed precedes its parent's).
func (b *Bus) CloseSessionTree(id string) error { return b.closeSession(id, true) }

func (b *Bus) closeSession(id string, cascade bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if _, ok := b.tombs[id]; ok {
		return nil
	}
	n := b.tree.Get(id)
	if n == nil {
		return fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	if b.backend != nil {
		// Every node, this one included, closes the session when its feed
		// ingests the session_closed event.
		var targets []*session
		if cascade {
			n.Value.node.Walk(func(d *scope.Node[*session]) bool { targets = append(targets, d.Value); return true })
			slices.Reverse(targets)
		} else {
			targets = []*session{n.Value}
		}
		type job struct {
			path []string
			id   string
		}
		jobs := make([]job, len(targets))
		for i, x := range targets {
			jobs[i] = job{x.pathLocked(), x.id}
		}
		b.mu.Unlock()
		defer b.mu.Lock()
		for _, j := range jobs {
			ev := Event{Session: j.id, Type: TypeSessionClosed, Time: b.opts.now(),
				Data: mustJSON(SessionClosedData{Session: j.id, Reason: "closed"})}
			if _, err := b.appendRemote(j.path, ev); err != nil {
				return err
			}
		}
		return nil
	}
	b.closeLocked(n.Value, cascade, true)
	return nil
}

// closeLocked closes x (and with cascade its subtree, children first). With
// announce it publishes session_closed; expiry does not.
func (b *Bus) closeLocked(x *session, cascade, announce bool) {
	if cascade {
		var kids []*session
		x.node.Children(func(c *scope.Node[*session]) bool { kids = append(kids, c.Value); return true })
		// A deterministic order: siblings close in id order.
		slices.SortFunc(kids, func(a, b *session) int { return strings.Compare(a.id, b.id) })
		for _, c := range kids {
			b.closeLocked(c, true, announce)
		}
	}
	now := b.nowNanos()
	if announce {
		r := &record{session: x.id, typ: TypeSessionClosed, nanos: now,
			data: mustJSON(SessionClosedData{Session: x.id, Reason: "closed"})}
		b.appendLocked(x, r, true)
		b.tombs[x.id] = now
	}
	// Remember what is lost with the ring so a resume that needed it is
	// told (ring_evicted) instead of silently missing it.
	if lost := x.lastID; lost > 0 {
		for a := x.parent(); a != nil; a = a.parent() {
			a.descLost = max(a.descLost, lost)
		}
		if p := x.parent(); p != nil {
			p.childLost = max(p.childLost, lost)
		}
		x.node.Children(func(c *scope.Node[*session]) bool {
			c.Value.subtreeLost = max(c.Value.subtreeLost, lost)
			return true
		})
		b.allLost = max(b.allLost, lost)
		if b.lost == nil {
			b.lost = make(map[string]lostMark)
		}
		b.lost[x.id] = lostMark{id: lost, at: now}
	}
	// End the session's own subscribers after they drain.
	for len(x.own) > 0 {
		s := x.own[len(x.own)-1]
		b.unregisterLocked(s)
		s.end(ErrSessionClosed, false)
	}
	for i := len(b.all) - 1; i >= 0; i-- {
		if s := b.all[i]; s.sess == x {
			b.unregisterLocked(s)
			s.end(ErrSessionClosed, false)
		}
	}
	// Children lose their parent: move their subtree subscribers out of
	// x.childSubtree (they now have no parent to hear).
	x.childSubtree = nil
	b.tree.Remove(x.id, false)
	x.ring.Clear()
	x.ring = nil
	b.stats.Sessions--
}

// lostMark is what one closed or expired session took with it.
type lostMark struct {
	id uint64 // newest id of the session
	at int64  // Unix ns when it went
}

// Stats is a snapshot of the bus's counters. Counters are totals since New;
// Sessions and Subscribers are current.
type Stats struct {
	Sessions    int    `json:"sessions"`    // live sessions
	Subscribers int    `json:"subscribers"` // live subscribers
	Published   uint64 `json:"published"`   // events accepted, session_closed included
	Delivered   uint64 `json:"delivered"`   // live events queued for subscribers
	Replayed    uint64 `json:"replayed"`    // events handed out from replay buffers
	Dropped     uint64 `json:"dropped"`     // events dropped for a subscriber (drop_oldest, drop_newest, droppable)
	Evicted     uint64 `json:"evicted"`     // subscribers evicted (client_evicted)
	Warnings    uint64 `json:"warnings"`    // slow_client_warning frames
	Resyncs     uint64 `json:"resyncs"`     // state_resync_required frames before or after a replay
	Expired     uint64 `json:"expired"`     // sessions expired for idleness
	Guarded     uint64 `json:"guarded"`     // events the reinsert guard skipped; always 0 unless there is a bug
}

// Stats returns the current counters. It takes the bus lock briefly.
func (b *Bus) Stats() Stats {
	b.mu.Lock()
	st := b.stats
	st.Subscribers = b.nsubs
	b.mu.Unlock()
	st.Replayed = uint64(b.replayed.Load())
	st.Guarded = uint64(b.guarded.Load())
	return st
}

// Close ends the bus: every subscription ends with ErrClosed once it has
// drained what was queued, the expiry goroutine stops, and later calls
// return ErrClosed. It is idempotent and returns nil; it does not wait for
// consumers.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.ttlDone
		return nil
	}
	b.closed = true
	var subs []*Subscription
	b.eachSubLocked(func(s *Subscription) { subs = append(subs, s) })
	for _, s := range subs {
		b.unregisterLocked(s)
		s.end(ErrClosed, false)
	}
	close(b.stopTTL)
	b.mu.Unlock()
	<-b.ttlDone
	if b.backend != nil {
		return b.backend.Close()
	}
	return nil
}

// cancel ends s at once, discarding its queue (Close, context cancellation).
func (b *Bus) cancel(s *Subscription, reason error) {
	b.mu.Lock()
	b.unregisterLocked(s)
	b.mu.Unlock()
	s.end(reason, true)
}

func (s *Subscription) end(reason error, discard bool) {
	s.mu.Lock()
	s.endLocked(reason, discard)
	s.mu.Unlock()
	s.stopWatch()
}

// stopWatch releases the context watch; safe to call more than once.
func (s *Subscription) stopWatch() {
	if s.stopCtx != nil {
		s.stopCtx()
	}
}
