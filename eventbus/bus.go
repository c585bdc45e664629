package eventbus

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/deadline"
	"github.com/replaybus/replaybus/eventbus/internal/diag"
	"github.com/replaybus/replaybus/replay"
	"github.com/replaybus/replaybus/scope"
)

// MaxNameLen is the longest session id or event type the bus accepts, in bytes.
const MaxNameLen = 256

// Bus is an in-memory, per-session event bus with a bounded replay buffer per
// session, the Go form of AgentPool's EventBus with qwen-code's resume and
// backpressure protocol. Create one with [New]; the zero value is not usable.
//
// All methods are safe for concurrent use. A publish takes the lock of its
// session's tree (a root and everything below it) for the id, the replay
// buffer append and the queueing for every matching subscriber, so
// publishes to distinct session trees run in parallel; while an "all"
// subscriber exists they meet for a moment in one bus-wide ordering step.
// CreateSession, CloseSession, expiry, an "all" Subscribe and Close change
// the structure and exclude every publisher for their (short) duration.
// None of them waits on a subscriber. docs/architecture.md has the locks.
type Bus struct {
	cfg       Options // defaults applied; OverflowPolicy the one in force
	policySet bool    // the OverflowPolicy given to New was set, not defaulted
	epoch     string
	droppable map[string]struct{}

	remote remote // the backend (package eventbus/backend); nil for the in-memory bus
	// feedWaiters are subscribes waiting for the backend feed (awaitFeed);
	// guarded by mu.
	feedWaiters []feedWaiter

	registry // sessions by id for lookups without any bus lock (registry.go)

	// mu is the structure lock (reader-biased): publishes and tree-scoped
	// subscribes and unsubscribes take its read side, then the tree lock
	// of their session's tree (session.tmu of the root); structural
	// changes, "all" subscribes, the backend paths and Close take it
	// exclusively and then need no other bus lock. What it guards when
	// held exclusively (and may be read under its read side): closed, the
	// tree's shape and every session's place in it, the registry,
	// tombstones, lost-id marks, kept buffers, highWater, feedWaiters,
	// stats. Lock order: mu → tree lock → allMu → Subscription.mu, and
	// mu → treeMu.
	mu        *xsync.RBMutex
	closed    bool
	highWater uint64 // highest id a backend acknowledged to this node
	tree      scope.Tree[*session]
	// all holds the "all" subscribers; guarded by allMu under mu's read
	// side (a publisher's ordering step, an unsubscribe), or by mu held
	// exclusively (an "all" subscribe adds only then). nall mirrors its
	// length: it rises only under mu held exclusively, so a publisher that
	// reads 0 under the read side knows no "all" subscriber can appear
	// before it is done.
	all     subList
	allMu   sync.Mutex
	nall    atomic.Int32
	allLost uint64 // highest id lost with any closed or expired session
	// lost remembers, for one session TTL, the newest id each closed or
	// expired session took with it; forgotten is the highest such id whose
	// entry has been dropped since. A re-created id is seeded from them.
	lost map[string]lostMark
	// Closed sessions' buffers kept for their open ancestors (retain.go):
	// by id, and in closing order for expiry and the MaxRetained cap.
	keptByID  map[string]*retained
	keptOrder *list.List
	forgotten uint64
	tombs     map[string]int64 // closed session id → Unix ns of closing
	stats     Stats            // Sessions, Expired, RetainedDropped: guarded by mu; the rest lives in cnt
	stopTTL   chan struct{}
	ttlDone   chan struct{}

	// seq is the last id assigned (0 before the first): the in-memory bus
	// takes the next one with seq.Add(1) where the event is appended; a
	// backend's feed sets it to the id it ingests. Every publish writes it,
	// so it has a cache line of its own, shared only with the two counters
	// every publish also writes right after (Stats.Published,
	// Stats.Delivered): they cost an atomic add on a line the publisher
	// already holds, and the fields publishers only read (diag.n, …) do
	// not move with them.
	_         [64]byte
	seq       atomic.Uint64
	published atomic.Uint64 // events accepted (Stats.Published)
	delivered atomic.Uint64 // live events queued for subscribers (Stats.Delivered)
	_         [40]byte
	nextSub   atomic.Uint64 // the last subscriber id given out
	nsubs     atomic.Int64  // live subscribers (Stats.Subscribers)
	cnt       counters      // the Stats counters publishers and subscribers write
	// guarded and replayed are Stats.Guarded and Stats.Replayed, written
	// by consumers and subscribes.
	guarded  atomic.Int64
	replayed atomic.Int64
	diag     diag.Aggregator // diagnostics queued under a lock, delivered after (diaglog.go)

	waits *deadline.Queue[*Subscription] // parked readers' deadlines (wait.go: NextBefore)
}

// counters are the rarer figures of [Stats] that publishing, subscribing
// and reading write, kept off every lock in atomics (the per-event ones sit
// beside Bus.seq).
type counters struct {
	dropped  atomic.Uint64
	evicted  atomic.Uint64
	warnings atomic.Uint64
	resyncs  atomic.Uint64 // state_resync_required frames, decided anywhere
}

// New returns a running in-memory Bus configured by cfg (zero fields take
// their defaults, see [Options]). It validates everything up front and
// returns an error naming the bad field and value ([*OptionError], or
// ErrInvalid for a bad Epoch). The bus starts one goroutine that expires
// idle sessions; [Bus.Close] stops it. The backend package makes a bus
// over a shared backend (NATS JetStream) instead.
func New(cfg Options) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	b := &Bus{cfg: cfg, mu: xsync.NewRBMutex(), tombs: make(map[string]int64), registry: newRegistry()}
	b.policySet = cfg.OverflowPolicy != ""
	if !b.policySet {
		b.cfg.OverflowPolicy = defaultOverflowPolicy // in-process default
	}
	b.waits = deadline.New(b.deadlineDue)
	if b.cfg.now == nil {
		b.cfg.now = time.Now
	}
	b.epoch = b.cfg.Epoch
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
// with [Options.Epoch]. A client cursor from another epoch is an epoch_reset.
func (b *Bus) Epoch() string { return b.epoch }

// Options returns the options in force: those given to [New] with their
// defaults applied, OverflowPolicy still "" when it was not set (then
// in-process subscribers get drop_oldest and the streaming adapters give
// theirs drop_subscriber, the rule of [Options.OverflowPolicy]).
func (b *Bus) Options() Options {
	o := b.cfg
	if !b.policySet {
		o.OverflowPolicy = ""
	}
	return o
}

// LastEventID returns the highest id assigned so far (0 before the first
// publish), qwen-code's lastEventId getter. With publishers running in
// parallel on other session trees, the event with that id may still be on
// its way into its replay buffer and queues; every publish that returned
// before the call has an id at or below it.
//
// It takes no lock (an atomic load) and never waits for a publish.
func (b *Bus) LastEventID() uint64 { return b.seq.Load() }

func (b *Bus) nowNanos() int64 { return b.cfg.now().UnixNano() }

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
// and copied as is; nil means no payload). The session is created if it
// does not exist (AgentPool's create-on-first-publish) — as a root, or under
// the parent the [SessionController] names — unless [Existing] is given.
// It returns the stored Event with its id, from one bus-wide sequence that
// starts at 1.
//
// It never blocks on a subscriber and never panics. It waits only for
// what touches the same session tree (another publish there, a tree-scoped
// subscribe or unsubscribe there), for structural changes (CreateSession,
// CloseSession, expiry, an "all" Subscribe, Close, a session created by a
// publish) and, while an "all" subscriber exists, for the moment another
// publish takes its id; publishes to distinct trees run in parallel.
// Errors: an ErrInvalid
// error naming the value for an empty or over-long session id or type, a
// type with a control character (CR, LF, …), a [frame.Reserved] type (the bus's
// own frames: use CloseSession for session_closed), data that cannot be
// encoded, or a [SessionController] that panicked creating the session —
// a refused event consumes no id; ErrSessionClosed for a closed session
// that was not reopened; ErrSessionNotFound for an unknown session with
// [Existing]; ErrClosed after [Bus.Close].
func (b *Bus) Publish(sessionID, typ string, data any, opts ...PublishOption) (Event, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, err
	}
	origin, create := publishOpts(opts)
	return b.publish(sessionID, typ, raw, origin, create)
}

// PublishJSON is [Bus.Publish] for a payload that is already JSON: data is
// validated (encoding/json's json.Valid) and copied, exactly as Publish does
// with a json.RawMessage, but without passing through an interface value,
// which costs Publish an allocation per call. Empty data means no payload.
// Errors and behaviour are Publish's; data is not retained.
func (b *Bus) PublishJSON(sessionID, typ string, data []byte, opts ...PublishOption) (Event, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, err
	}
	var raw []byte
	if len(data) > 0 {
		if !json.Valid(data) {
			return Event{}, invalidf("data is not valid JSON: %.60q", data)
		}
		raw = append([]byte(nil), data...)
	}
	origin, create := publishOpts(opts)
	return b.publish(sessionID, typ, raw, origin, create)
}

// checkEvent validates what every publish names.
func checkEvent(sessionID, typ string) error {
	if err := checkName("session id", sessionID); err != nil {
		return err
	}
	if err := checkName("event type", typ); err != nil {
		return err
	}
	if frame.Reserved(typ) {
		return invalidf("event type %q is reserved for the bus's own frames", typ)
	}
	return nil
}

// publishOpts applies opts (nil ones ignored) and returns the origin and
// whether a missing session is created.
func publishOpts(opts []PublishOption) (origin string, create bool) {
	if len(opts) == 0 {
		return "", true
	}
	// Declared here so that it moves to the heap (o(&po) makes it escape)
	// only for a publish that has options.
	var po publishOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	return po.origin, !po.existing
}

// testHookTreeLocked, when set by a test, runs in appendLocked right after
// the id is taken (and the "all" subscribers were offered the event),
// before the ring append and the tree's fan-out: on the publish path of an
// existing session that is inside the tree-locked section (read side of
// b.mu and the tree lock held). It gets the session id. Set it only while
// no other test publishes.
var testHookTreeLocked func(session string)

// publish stores and fans out one validated, encoded event. Only what must
// be ordered runs under a lock — the id, the replay buffer append and
// queueing for the subscribers in scope; the record, the clock and the
// returned Event are made outside it, and parked consumers are woken after
// it is released.
//
// An existing session (the common case) is published to under the read
// side of the structure lock and its tree's lock: publishers of distinct
// trees do not wait for each other. A session that must be created first
// (or a refused one) takes the structure lock exclusively.
func (b *Bus) publish(sessionID, typ string, raw []byte, origin string, create bool) (Event, error) {
	defer b.flushDiagnostics() // after every lock is released
	if b.remote != nil {
		return b.publishRemote(sessionID, typ, raw, origin, create)
	}
	r := &record{typ: typ, data: raw, origin: originRef(origin), nanos: b.nowNanos()}
	f := fan{wakes: wakeLists.Get().(*[]*Subscription)}
	defer f.release() // the wake-ups, once no lock is held
	tok := b.mu.RLock()
	if b.closed {
		b.mu.RUnlock(tok)
		return Event{}, ErrClosed
	}
	if x, ok := b.sessions.Load(sessionID); ok {
		tl := x.treeLock()
		tl.Lock()
		r.session = x.id
		b.appendLocked(x, r, false, &f)
		tl.Unlock()
		b.mu.RUnlock(tok)
		// r is immutable from here on: subscribers read it concurrently.
		return r.event(false), nil
	}
	b.mu.RUnlock(tok)
	// Unknown here: create it (or refuse) with the structure held.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Event{}, ErrClosed
	}
	x, err := b.sessionLocked(sessionID, create)
	if err != nil {
		b.mu.Unlock()
		return Event{}, err
	}
	r.session = x.id
	b.appendLocked(x, r, false, &f)
	b.mu.Unlock()
	return r.event(false), nil
}

// publishRemote is publish on a bus over a backend: the backend assigns the
// id and the feed delivers.
func (b *Bus) publishRemote(sessionID, typ string, raw []byte, origin string, create bool) (Event, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Event{}, ErrClosed
	}
	// The session is known here from now on, and published: a
	// CreateSession on this node can no longer give it a parent, as in
	// memory. A closed session is refused as in memory.
	x, err := b.sessionLocked(sessionID, create)
	var path []string
	if err == nil {
		x.published = true
		path = x.pathLocked()
	}
	now := b.cfg.now()
	b.mu.Unlock()
	if err != nil {
		return Event{}, err
	}
	return b.appendRemote(path, Event{Session: sessionID, Type: typ, Data: raw, Time: now, Origin: origin})
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

// appendLocked assigns the next id, stores r in x's replay buffer and fans
// it out; f collects the wake-ups (see [fan]). The caller holds b.mu's read
// side and x's tree lock, or b.mu exclusively.
//
// The id is taken here, under the tree lock, so ids rise in the order
// events are appended within every tree (and so within every replay buffer
// and every tree-scoped subscriber's queue). While an "all" subscriber
// exists, the id is taken and the event offered to the "all" subscribers
// under allMu, the one bus-wide step: every "all" subscriber then sees the
// ids of all trees in rising order, with nothing missing below the newest,
// so one cursor resumes it. The tree's own fan-out follows outside allMu.
func (b *Bus) appendLocked(x *session, r *record, forced bool, f *fan) {
	droppable := false
	if b.droppable != nil {
		_, droppable = b.droppable[r.typ]
	}
	if b.nall.Load() > 0 {
		b.allMu.Lock()
		r.id = b.seq.Add(1)
		b.offerLocked(&b.all, nil, r, droppable, forced, f)
		b.allMu.Unlock()
	} else {
		r.id = b.seq.Add(1)
	}
	if testHookTreeLocked != nil {
		testHookTreeLocked(x.id)
	}
	x.published = true
	x.lastID = r.id
	x.touch(r.nanos)
	x.ring.Append(r)
	x.info.lastID.Store(r.id)
	if n := int32(x.ring.Len()); n != x.info.buffered.Load() {
		x.info.buffered.Store(n)
	}
	b.published.Add(1)
	b.fanOutLocked(x, r, droppable, forced, f)
	if f.delivered != 0 {
		b.delivered.Add(uint64(f.delivered))
	}
	f.delivered = 0
}

// sessionLocked returns the session, creating it as a root when create is
// set. b.mu must be held exclusively.
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
	if b.cfg.SessionController != nil {
		return b.addAskedLocked(id, nil)
	}
	return b.addLocked(id, "")
}

// maxAskDepth bounds how many ancestors one [SessionController] lookup may
// create.
const maxAskDepth = 64

// addAskedLocked creates the unknown session id under the parent the
// session controller names, creating that parent first (asking again) when
// the bus does not know it either. asking holds the ids being created
// further down, so a controller that answers with a cycle ends it: the
// session that would close it becomes a root. A controller that panics
// fails the whole creation with the error askParent makes of it.
func (b *Bus) addAskedLocked(id string, asking []string) (*session, error) {
	parent, err := b.askParent(id)
	if err != nil {
		return nil, err
	}
	switch {
	case parent == "" || parent == id || checkName("parent session id", parent) != nil,
		len(asking) >= maxAskDepth, slices.Contains(asking, parent):
		parent = ""
	default:
		if _, closed := b.tombs[parent]; closed {
			parent = ""
		} else if b.tree.Get(parent) == nil {
			if _, err := b.addAskedLocked(parent, append(asking, id)); errors.Is(err, errControllerPanicked) {
				return nil, err
			} else if err != nil {
				parent = ""
			}
		}
	}
	return b.addLocked(id, parent)
}

// errControllerPanicked marks the error of a session controller that
// panicked (wrapped with ErrInvalid).
var errControllerPanicked = errors.New("session controller panicked")

// askParent asks the session controller for id's parent. The controller
// runs with the structure lock held exclusively: a panic in it must not
// leave the lock held (every later call of the bus would wait forever), so
// it is recovered and returned as an ErrInvalid error naming it.
func (b *Bus) askParent(id string) (parent string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w for session %q: %v", ErrInvalid, errControllerPanicked, id, p)
		}
	}()
	return b.cfg.SessionController(id), nil
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
	x := &session{id: id, ring: ring}
	x.active.Store(b.nowNanos())
	if err := b.treeAddLocked(x, parent); err != nil {
		return nil, err
	}
	b.stats.Sessions++
	b.adoptLocked(x)
	return x, nil
}

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
// closed (reopen it first); ErrClosed after Close. Over a backend (package
// eventbus/backend) the
// creation, reopening or attachment is also appended to the backend so
// every node learns it, and the backend's error is returned.
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
	if _, ok := b.tombs[parent]; ok && parent != "" {
		return fmt.Errorf("%w: parent %q", ErrSessionClosed, parent)
	}
	n := b.tree.Get(id)
	if n == nil {
		if parent == id {
			return fmt.Errorf("%w: %q under itself", scope.ErrCycle, id)
		}
		_, reopened := b.tombs[id]
		x, err := b.addLocked(id, parent)
		if err != nil {
			return err
		}
		// A reopened id is a new incarnation: its replay buffer starts
		// empty and is marked evicted up to what the closed one held
		// (addLocked), so an old cursor gets ring_evicted.
		delete(b.tombs, id)
		if b.remote == nil {
			return nil
		}
		path := x.pathLocked()
		now := b.cfg.now()
		b.mu.Unlock()
		_, err = b.appendRemote(path, Event{Session: id, Type: typeSessionCreated, Time: now})
		b.mu.Lock()
		if err != nil && !b.closed && b.tree.Get(id) == x.node && x.info.nsubs.Load() == 0 && !x.published && x.node.NumChildren() == 0 {
			// No other node learnt of it: do not keep a local phantom.
			b.treeRemoveLocked(x)
			b.stats.Sessions--
			if reopened {
				b.tombs[id] = b.nowNanos()
			}
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
	if err := b.treeSetParentLocked(id, parent); err != nil {
		return err
	}
	b.attachedLocked(x)
	if b.remote == nil {
		return nil
	}
	path := x.pathLocked()
	now := b.cfg.now()
	b.mu.Unlock()
	_, err := b.appendRemote(path, Event{Session: id, Type: typeSessionCreated, Time: now})
	b.mu.Lock()
	return err
}

// attachedLocked finishes attaching the root x to its new parent: its
// subtree subscribers move to the parent's list, and what x's subtree lost
// with closed or expired sessions is now lost to the new ancestors'
// descendants scope too.
func (b *Bus) attachedLocked(x *session) {
	p := x.parent()
	b.reparentLocked(x, nil, p)
	lost := x.descLost
	for a := p; a != nil && lost > 0; a = a.parent() {
		a.descLost = max(a.descLost, lost)
	}
}

// SessionClosed reports whether session id was closed and has not been
// reopened since. A closed id is remembered for the session TTL; after that
// it is simply unknown (SessionClosed and SessionExists both false).
//
// It takes the structure lock's read side: it waits only for a structural
// change, never for a publish.
func (b *Bus) SessionClosed(id string) bool {
	tok := b.mu.RLock()
	defer b.mu.RUnlock(tok)
	_, ok := b.tombs[id]
	return ok
}

// SessionInfo describes one session for listings.
type SessionInfo struct {
	ID          string `json:"id"`               // the session id
	Parent      string `json:"parent,omitempty"` // its parent's id, "" for a root
	Subscribers int    `json:"subscribers"`      // subscribers made on it (any scope)
	Buffered    int    `json:"buffered"`         // events in its replay buffer
	LastEventID uint64 `json:"lastEventId"`      // newest id published to it, 0 if none
}

// ClearReplayBuffer empties session id's replay buffer, as AgentPool's
// clear_replay_buffer (which agent servers call at the start of every
// turn). The cleared ids count as evicted: a later resume from before them
// gets ring_evicted. Like AgentPool's, it is a no-op (nil) for an id the bus
// does not know or that was closed. It holds the lock of id's session tree
// (under the structure lock's read side), as a publish there does: other
// trees' publishers do not wait for it. Errors: ErrClosed after Close.
func (b *Bus) ClearReplayBuffer(id string) error {
	tok := b.mu.RLock()
	defer b.mu.RUnlock(tok)
	if b.closed {
		return ErrClosed
	}
	if x, ok := b.sessions.Load(id); ok {
		tl := x.treeLock()
		tl.Lock()
		x.ring.Clear()
		x.info.buffered.Store(0)
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
// session TTL, unless [Bus.CreateSession] reopens it (AgentPool silently
// re-creates the buffer on the next publish; we refuse, so a late publish
// cannot resurrect a closed session unnoticed).
//
// Closing a closed or unknown session is a no-op (nil), as in AgentPool.
// Errors: ErrClosed after Close; over a backend, the backend's error.
func (b *Bus) CloseSession(id string) error { return b.closeSession(id, false) }

// CloseSessionTree closes session id and every session below it, however
// deep, each as [Bus.CloseSession] does: children before their parent (so
// each child's session_closed precedes its parent's), siblings in id order.
// On a closed or unknown id it is a no-op (nil).
func (b *Bus) CloseSessionTree(id string) error { return b.closeSession(id, true) }

func (b *Bus) closeSession(id string, cascade bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	n := b.tree.Get(id)
	if n == nil {
		return nil
	}
	if b.remote != nil {
		// Every node, this one included, closes the session when its feed
		// ingests the session_closed event.
		var targets []*session
		if cascade {
			targets = closeOrder(n.Value)
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
			ev := Event{Session: j.id, Type: frame.TypeSessionClosed, Time: b.cfg.now(),
				Data: mustJSON(frame.SessionClosedData{Session: j.id, Reason: "closed"})}
			if _, err := b.appendRemote(j.path, ev); err != nil {
				return err
			}
		}
		return nil
	}
	if cascade {
		for _, x := range closeOrder(n.Value) {
			b.closeLocked(x, true)
		}
		return nil
	}
	b.closeLocked(n.Value, true)
	return nil
}

// closeOrder returns x's subtree in the order CloseSessionTree closes it:
// every session after all of its descendants, siblings in id order. It is
// iterative, so a tree of any depth is fine.
func closeOrder(x *session) []*session {
	// A pre-order walk with children visited in reverse id order, reversed,
	// puts children before parents and siblings in id order.
	var out []*session
	stack := []*session{x}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, y)
		start := len(stack)
		y.node.Children(func(c *scope.Node[*session]) bool { stack = append(stack, c.Value); return true })
		slices.SortFunc(stack[start:], func(a, b *session) int { return strings.Compare(a.id, b.id) })
	}
	slices.Reverse(out)
	return out
}

// closeLocked closes x. With announce it publishes session_closed; expiry
// does not. x's children move up to x's parent.
func (b *Bus) closeLocked(x *session, announce bool) {
	now := b.nowNanos()
	if announce {
		r := &record{session: x.id, typ: frame.TypeSessionClosed, nanos: now,
			data: mustJSON(frame.SessionClosedData{Session: x.id, Reason: "closed"})}
		b.appendLocked(x, r, true, &fan{}) // wakes at once
		b.tombs[x.id] = now
	}
	p := x.parent()
	var kids []*session
	x.node.Children(func(c *scope.Node[*session]) bool { kids = append(kids, c.Value); return true })
	// x's buffer stays readable for the descendants and all scopes of its
	// open ancestors (retain.go); a root's goes, with all it holds. What
	// goes, and what the subtree scope no longer reads, is remembered so a
	// resume that needed it is told (ring_evicted) instead of silently
	// missing it.
	if p != nil {
		b.keepLocked(x, p, now)
	} else {
		b.dropHeldLocked(x)
		b.allLost = max(b.allLost, x.lastID)
	}
	if lost := x.lastID; lost > 0 {
		if p != nil {
			p.childLost = max(p.childLost, lost)
		}
		for _, c := range kids {
			c.subtreeLost = max(c.subtreeLost, lost)
		}
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
	// The children move up to x's parent, and their subtree subscribers
	// (kept in x.childSubtree) to the parent's list.
	b.treeRemoveLocked(x)
	for _, c := range kids {
		if p != nil {
			_ = b.treeSetParentLocked(c.id, p.id) // p is an ancestor of c's old place: no cycle
		}
		b.reparentLocked(c, x, p)
	}
	x.childSubtree = nil
	if p == nil {
		x.ring.Clear()
	}
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
	// Retained is the number of closed sessions whose replay buffers are
	// kept now for the scopes of their open ancestors (at most
	// Options.MaxRetained); RetainedDropped counts those dropped before
	// being reopened: at Options.ClosedRetention, at the cap, or when
	// their tree's root closed.
	Retained        int    `json:"retained"`
	RetainedDropped uint64 `json:"retainedDropped"`
}

// Stats returns the current counters. It takes the structure lock's read
// side briefly, for the figures only structural changes move (Sessions,
// Expired, Retained, RetainedDropped) — it never waits for a publish; the
// others are read from counters that publishers and
// subscribers write without it, one by one: during concurrent publishing
// the figures are each exact at some instant, not all at the same one.
func (b *Bus) Stats() Stats {
	tok := b.mu.RLock()
	st := b.stats
	st.Retained = len(b.keptByID)
	b.mu.RUnlock(tok)
	st.Subscribers = int(b.nsubs.Load())
	st.Published = b.published.Load()
	st.Delivered = b.delivered.Load()
	st.Dropped = b.cnt.dropped.Load()
	st.Evicted = b.cnt.evicted.Load()
	st.Warnings = b.cnt.warnings.Load()
	st.Resyncs = b.cnt.resyncs.Load()
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
	b.waits.Close()
	<-b.ttlDone
	if b.remote != nil {
		return b.remote.Close()
	}
	return nil
}

// cancel ends s at once, discarding its queue (Close, context
// cancellation). It takes the structure lock's read side and the lock that
// guards s's lists — its session's tree lock, or allMu for an "all"
// subscriber — so it waits for publishes of that tree (or the ordering
// step) only.
func (b *Bus) cancel(s *Subscription, reason error) {
	tok := b.mu.RLock()
	if s.kind == scope.All {
		b.allMu.Lock()
		b.unregisterLocked(s)
		b.allMu.Unlock()
	} else {
		tl := s.sess.treeLock()
		tl.Lock()
		b.unregisterLocked(s)
		tl.Unlock()
	}
	b.mu.RUnlock(tok)
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
