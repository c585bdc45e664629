package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// TestPropertyDelivery drives random sequences of CreateSession, Publish,
// Subscribe (every scope, with and without a cursor or replay, small queue
// limits under every policy), reads, cancellations, Unsubscribe (the
// draining end: what was queued is still read, then ErrUnsubscribed),
// ClearReplayBuffer and CloseSession over a tree of up to six sessions, and checks every frame
// every subscriber reads against a model written from the delivery contract alone: a
// plain list of events, the tree, and per-session rings of size N.
//
// For each subscriber the model predicts the exact head of its stream
// (epoch_reset / ring_evicted, the replay merged by id within the replay
// budget, replay_budget_exceeded, replay_complete) and the list of live ids
// in its scope. The live part must be exactly that list, except for losses
// that a frame announces: events_dropped with the right lastDeliveredId and
// the exact range and count, or a terminal client_evicted naming the first
// id not delivered. Subscribers without small limits must lose nothing.
func TestPropertyDelivery(t *testing.T) {
	t.Parallel()
	var tally propTally
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		h.tally = &tally
		defer h.bus.Close()
		// Repeat picks actions uniformly; the duplicates weight them.
		rt.Repeat(map[string]func(*rapid.T){
			"publish":      h.publish,
			"publish2":     h.publish,
			"publish3":     h.publish,
			"publish4":     h.publish,
			"create":       h.create,
			"create2":      h.create,
			"subscribe":    h.subscribe,
			"subscribe2":   h.subscribe,
			"read":         h.read,
			"read2":        h.read,
			"cancel":       h.cancel,
			"unsubscribe":  h.unsubscribe,
			"closeSession": h.closeSession,
			"clear":        h.clear,
			"":             h.checkState,
		})
		h.finish()
	})
	t.Logf("%+v", tally)
}

// propTally counts what the property test exercised, to show in -v output
// that its cases reach the interesting paths.
type propTally struct {
	Cases, Events, Subscribers, Frames, Replayed, Resumes, RingEvicted, EpochResets, Budget int
	Warnings, Drops, Evictions, SessionsClosed, Cancels, SessionClosedEnds, Unsubscribes    int
	Reopened, AttachedLate, MovedUp, Kept, KeptDropped, Adopted                             int
}

var sessionNames = []string{"a", "b", "c", "d", "e", "f"}

// model types

type mEvent struct {
	id      uint64
	session string
	typ     string
	size    int
}

type mSession struct {
	id        string
	parent    *mSession
	children  []*mSession
	ring      []mEvent
	evicted   uint64 // highest id no longer in ring
	published bool
	lastID    uint64
	descLost  uint64   // highest id of a kept buffer dropped while this session's descendants scope read it
	kept      []*mKept // closed sessions' buffers held here for the descendants and all scopes
}

// mKept is a closed session's replay buffer, kept for the descendants and
// all scopes of its open ancestors (held by the nearest one) until the
// tree's root closes, MaxRetained is exceeded, or its id is reopened.
type mKept struct {
	id      string
	ring    []mEvent
	evicted uint64
	lastID  uint64
	holder  *mSession
}

// closedRec is what the model remembers of a closed session for the
// subtree scope, which does not read kept buffers: its parent and children
// at the moment it closed (by identity: a reopened id is another session)
// and the id of its session_closed.
type closedRec struct {
	parent   *mSession
	children []*mSession
	lost     uint64
}

type harness struct {
	t      *rapid.T
	bus    *eventbus.Bus
	n      int   // ring size
	budget int64 // replay budget in bytes

	nextID   uint64
	events   map[uint64]mEvent
	sessions map[string]*mSession
	tombs    map[string]bool
	lostByID map[string]uint64 // the session_closed id of each closed id, seeds a reopened ring
	closed   []*closedRec
	allLost  uint64
	keptBy   map[string]*mKept // by id
	keptFIFO []*mKept          // in closing order: the MaxRetained cap drops the first
	maxKept  int
	subs     []*mSub
	tally    *propTally
}

func newHarness(t *rapid.T) *harness {
	h := &harness{
		t:        t,
		n:        rapid.IntRange(1, 6).Draw(t, "ring"),
		budget:   rapid.SampledFrom([]int64{eventbus.Options{}.WithDefaults().ReplayBudgetBytes, 25, 60}).Draw(t, "budget"),
		nextID:   1,
		events:   map[uint64]mEvent{},
		sessions: map[string]*mSession{},
		tombs:    map[string]bool{},
		lostByID: map[string]uint64{},
		keptBy:   map[string]*mKept{},
		maxKept:  rapid.SampledFrom([]int{eventbus.Options{}.WithDefaults().MaxRetained, 1, 2}).Draw(t, "maxRetained"),
	}
	b, err := eventbus.New(eventbus.Options{
		ReplayBufferSize:  h.n,
		ReplayBudgetBytes: h.budget,
		DroppableTypes:    []string{"delta"},
		MaxRetained:       h.maxKept,
		Epoch:             "e1",
	})
	if err != nil {
		t.Fatal(err)
	}
	h.bus = b
	return h
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf(format, args...)
}

// newSession adds a session to the model. Nothing expires within a case, so
// a brand-new id starts with nothing evicted and must never announce a loss;
// a reopened id (CreateSession on a closed one) takes back its kept buffer
// if there is one, else starts with everything up to its session_closed
// counted as evicted.
func (h *harness) newSession(id string, parent *mSession) *mSession {
	x := &mSession{id: id, parent: parent, evicted: h.lostByID[id]}
	if parent != nil {
		parent.children = append(parent.children, x)
	}
	h.sessions[id] = x
	if k := h.keptBy[id]; k != nil {
		h.unkeep(k)
		for a := k.holder; a != nil; a = a.parent {
			if a != x && !a.isAncestorOf(x) {
				a.descLost = max(a.descLost, k.lastID)
			}
		}
		x.ring, x.evicted, x.lastID = k.ring, k.evicted, k.lastID
		h.tally.Adopted++
	}
	return x
}

func (h *harness) unkeep(k *mKept) {
	k.holder.kept = slices.DeleteFunc(k.holder.kept, func(o *mKept) bool { return o == k })
	h.keptFIFO = slices.DeleteFunc(h.keptFIFO, func(o *mKept) bool { return o == k })
	delete(h.keptBy, k.id)
}

// dropKept drops a kept buffer: the descendants scopes that read it and the
// all scope lose it.
func (h *harness) dropKept(k *mKept) {
	h.unkeep(k)
	for a := k.holder; a != nil; a = a.parent {
		a.descLost = max(a.descLost, k.lastID)
	}
	h.allLost = max(h.allLost, k.lastID)
	h.tally.KeptDropped++
}

func (h *harness) liveSessions() []string {
	var out []string
	for _, id := range sessionNames { // in order: draws must be reproducible
		if h.sessions[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

func (x *mSession) isAncestorOf(y *mSession) bool {
	for a := y.parent; a != nil; a = a.parent {
		if a == x {
			return true
		}
	}
	return false
}

// inScope reports whether an event of session ev reaches a subscriber made
// on x with scope k (the scopes of the scope package).
func inScope(x *mSession, k scope.Kind, ev *mSession) bool {
	switch k {
	case scope.Session:
		return ev == x
	case scope.Descendants:
		return ev == x || x.isAncestorOf(ev)
	case scope.Subtree:
		return ev == x || (x.parent != nil && (ev == x.parent || ev.parent == x.parent))
	case scope.All:
		return true
	}
	panic("bad scope")
}

// deliver appends a just-published event to every subscriber that hears it.
func (h *harness) deliver(ev mEvent) {
	src := h.sessions[ev.session]
	for _, m := range h.subs {
		if m.registered && inScope(h.sessions[m.session], m.kind, src) {
			m.live = append(m.live, ev.id)
		}
	}
}

func (h *harness) append(x *mSession, typ string, size int) mEvent {
	ev := mEvent{id: h.nextID, session: x.id, typ: typ, size: size}
	h.nextID++
	h.events[ev.id] = ev
	x.ring = append(x.ring, ev)
	if len(x.ring) > h.n {
		x.evicted = max(x.evicted, x.ring[0].id)
		x.ring = slices.Delete(x.ring, 0, 1)
	}
	x.published = true
	x.lastID = ev.id
	h.deliver(ev)
	return ev
}

// actions

func (h *harness) publish(t *rapid.T) {
	id := rapid.SampledFrom(sessionNames).Draw(t, "session")
	typ := rapid.SampledFrom([]string{"msg", "msg", "delta"}).Draw(t, "type")
	size := rapid.IntRange(4, 30).Draw(t, "size")
	got, err := h.bus.Publish(id, typ, payload(size))
	if h.tombs[id] {
		if !errors.Is(err, eventbus.ErrSessionClosed) {
			h.fatalf("publish to closed %s: err %v", id, err)
		}
		return
	}
	if err != nil {
		h.fatalf("publish to %s: %v", id, err)
	}
	x := h.sessions[id]
	if x == nil {
		x = h.newSession(id, nil)
	}
	ev := h.append(x, typ, size)
	if got.ID != ev.id || got.Session != id || got.Type != typ || len(got.Data) != size {
		h.fatalf("publish returned %+v, model says id %d", got, ev.id)
	}
}

func (h *harness) create(t *rapid.T) {
	id := rapid.SampledFrom(sessionNames).Draw(t, "session")
	parent := rapid.SampledFrom(append([]string{""}, sessionNames...)).Draw(t, "parent")
	if live := h.liveSessions(); len(live) > 0 && rapid.Bool().Draw(t, "liveParent") {
		parent = rapid.SampledFrom(live).Draw(t, "parent")
	}
	err := h.bus.CreateSession(id, parent)
	want := h.modelCreate(id, parent)
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		h.fatalf("CreateSession(%q, %q) = %v, model says %v", id, parent, err, want)
	}
}

// modelCreate applies CreateSession to the model and returns the sentinel
// error the bus must return, nil for success: a closed id is reopened, a
// root is attached to a parent whether or not it published.
func (h *harness) modelCreate(id, parent string) error {
	if parent != "" && h.tombs[parent] {
		return eventbus.ErrSessionClosed
	}
	p := h.sessions[parent]
	x := h.sessions[id]
	if x == nil {
		if parent == id {
			return scope.ErrCycle
		}
		if parent != "" && p == nil {
			return scope.ErrUnknownParent
		}
		if h.tombs[id] {
			h.tally.Reopened++
		}
		delete(h.tombs, id)
		h.newSession(id, p)
		return nil
	}
	if x.parent == p && (p != nil || parent == "") {
		return nil
	}
	if x.parent != nil {
		return eventbus.ErrInvalid
	}
	if p == nil {
		return scope.ErrUnknownParent
	}
	if p == x || x.isAncestorOf(p) {
		return scope.ErrCycle
	}
	x.parent = p
	p.children = append(p.children, x)
	if x.published {
		h.tally.AttachedLate++
	}
	// What x's subtree lost is now lost to its new ancestors' descendants
	// scope too.
	for a := p; a != nil; a = a.parent {
		a.descLost = max(a.descLost, x.descLost)
	}
	return nil
}

func (h *harness) subscribe(t *rapid.T) {
	if len(h.subs) >= 12 {
		return
	}
	id := rapid.SampledFrom(sessionNames).Draw(t, "session")
	m := &mSub{h: h, session: id}
	m.kind = rapid.SampledFrom([]scope.Kind{scope.Session, scope.Descendants, scope.Subtree, scope.All}).Draw(t, "scope")
	o := eventbus.SubscribeOptions{Scope: m.kind, Name: fmt.Sprint(len(h.subs))}
	if rapid.Bool().Draw(t, "hasCursor") {
		c := &eventbus.Position{ID: uint64(rapid.IntRange(0, int(h.nextID)+1).Draw(t, "cursor"))}
		if len(h.subs) > 0 && rapid.Bool().Draw(t, "resume") {
			// A real resume: where an earlier subscriber got to.
			c.ID = h.subs[rapid.IntRange(0, len(h.subs)-1).Draw(t, "from")].last
		}
		c.Epoch = rapid.SampledFrom([]string{"", "", "e1", "e0"}).Draw(t, "epoch")
		o.Cursor = c
	}
	o.NoReplay = rapid.Bool().Draw(t, "noReplay")
	m.policy, m.warnOn = eventbus.DropSubscriber, true
	if m.limited = rapid.Bool().Draw(t, "limited"); m.limited {
		o.MaxQueued = rapid.IntRange(1, 4).Draw(t, "maxQueued")
		o.MaxQueuedBytes = rapid.SampledFrom([]int64{0, 40, 80}).Draw(t, "maxQueuedBytes")
		o.Policy = rapid.SampledFrom([]eventbus.OverflowPolicy{eventbus.DropSubscriber, eventbus.DropOldest, eventbus.DropNewest}).Draw(t, "policy")
		m.policy = o.Policy
		m.warnOn = rapid.Bool().Draw(t, "warn")
		o.SlowClientWarning = &m.warnOn
	}
	m.eventsMode = rapid.IntRange(0, 4).Draw(t, "mode") == 0
	ctx, cancel := context.WithCancel(context.Background())
	s, err := h.bus.Subscribe(ctx, id, o)
	if h.tombs[id] {
		cancel()
		if !errors.Is(err, eventbus.ErrSessionClosed) {
			h.fatalf("subscribe to closed %s: err %v", id, err)
		}
		return
	}
	if err != nil {
		cancel()
		h.fatalf("subscribe to %s: %v", id, err)
	}
	m.s, m.cancel, m.opts = s, cancel, o
	x := h.sessions[id]
	if x == nil {
		x = h.newSession(id, nil)
	}
	m.head, m.last = h.expectHead(x, o)
	h.tally.Subscribers++
	if o.Cursor != nil && !o.NoReplay {
		h.tally.Resumes++
	}
	m.registered = true
	h.subs = append(h.subs, m)
}

// expectHead returns the frames the model expects before the first live
// event, and the last id the subscriber has after them.
func (h *harness) expectHead(x *mSession, o eventbus.SubscribeOptions) ([]want, uint64) {
	if o.NoReplay {
		return nil, 0 // NoReplay wins over a cursor, as AgentPool's replay=False
	}
	var head []want
	cursor, reset := uint64(0), false
	if o.Cursor != nil {
		cursor = o.Cursor.ID
		if (o.Cursor.Epoch != "" && o.Cursor.Epoch != "e1") || cursor >= h.nextID {
			reset = true
			head = append(head, want{frame: frame.TypeStateResyncRequired, resync: &frame.ResyncData{
				Reason: frame.ReasonEpochReset, LastDeliveredID: o.Cursor.ID, Epoch: "e1"}})
			cursor = 0
		}
	}
	var snap []mEvent
	evicted := uint64(0)
	for _, y := range h.sessions {
		if !inScope(x, o.Scope, y) {
			continue
		}
		evicted = max(evicted, y.evicted)
		for _, ev := range y.ring {
			if ev.id > cursor {
				snap = append(snap, ev)
			}
		}
	}
	// Kept buffers of closed sessions: read by the descendants scope of
	// their holder and its ancestors, and by the all scope.
	for _, k := range h.keptBy {
		if o.Scope == scope.All || o.Scope == scope.Descendants && (k.holder == x || x.isAncestorOf(k.holder)) {
			evicted = max(evicted, k.evicted)
			for _, ev := range k.ring {
				if ev.id > cursor {
					snap = append(snap, ev)
				}
			}
		}
	}
	sort.Slice(snap, func(i, j int) bool { return snap[i].id < snap[j].id })
	switch o.Scope {
	case scope.Descendants:
		evicted = max(evicted, x.descLost)
	case scope.All:
		evicted = max(evicted, h.allLost)
	case scope.Subtree:
		for _, c := range h.closed {
			if slices.Contains(c.children, x) || (x.parent != nil && c.parent == x.parent) {
				evicted = max(evicted, c.lost)
			}
		}
	}
	if o.Cursor != nil && !reset && evicted > cursor {
		// The first held id after the newest loss: nothing after it is
		// missing (a quiet ring may hold older ids than a busy one lost).
		earliest := h.nextID
		for _, ev := range snap {
			if ev.id > evicted {
				earliest = ev.id
				break
			}
		}
		head = append(head, want{frame: frame.TypeStateResyncRequired, resync: &frame.ResyncData{
			Reason: frame.ReasonRingEvicted, LastDeliveredID: cursor, CompleteFromID: earliest}})
	}
	n, used := 0, int64(0)
	for n < len(snap) && (n == 0 || used+int64(snap[n].size) <= h.budget) {
		used += int64(snap[n].size)
		n++
	}
	for _, ev := range snap[:n] {
		head = append(head, want{event: ev})
	}
	last := cursor
	if n > 0 {
		last = snap[n-1].id
	}
	if n < len(snap) {
		head = append(head, want{frame: frame.TypeStateResyncRequired, resync: &frame.ResyncData{
			Reason: frame.ReasonReplayBudgetExceeded, LastDeliveredID: last,
			CompleteFromID: h.nextID, SkippedCount: len(snap) - n}}) // the first live id
	}
	// The history is not whole when an event in scope after the cursor
	// (any, without one) was evicted: replay_complete says so, and ends
	// even a replay without cursor then.
	lost := evicted > cursor
	if o.Cursor != nil || n < len(snap) || lost {
		var first uint64
		if n > 0 {
			first = snap[0].id
		}
		head = append(head, want{frame: frame.TypeReplayComplete,
			complete: &frame.ReplayCompleteData{LastReplayedEventID: last, ReplayedCount: n, FirstReplayedEventID: first, HistoryLost: lost}})
	}
	return head, last
}

func (h *harness) pickSub(t *rapid.T, pred func(*mSub) bool) *mSub {
	var cands []*mSub
	for _, m := range h.subs {
		if pred(m) {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[rapid.IntRange(0, len(cands)-1).Draw(t, "sub")]
}

func (h *harness) read(t *rapid.T) {
	m := h.pickSub(t, func(m *mSub) bool { return !m.cancelled && !m.eventsMode })
	if m == nil {
		return
	}
	k := rapid.IntRange(1, 6).Draw(t, "frames")
	if rapid.Bool().Draw(t, "batch") {
		// The same frames in one NextBatch (a deadline already past: what
		// is ready, up to k frames, or nothing).
		buf := make([]eventbus.Event, k)
		n, _ := m.s.NextBatch(time.Now().Add(-time.Second), buf)
		for _, ev := range buf[:n] {
			m.feed(ev)
		}
		return
	}
	for ; k > 0; k-- {
		ev, ok := m.s.TryNext()
		if !ok {
			return
		}
		m.feed(ev)
	}
}

func (h *harness) cancel(t *rapid.T) {
	if rapid.Bool().Draw(t, "skipCancel") {
		return
	}
	m := h.pickSub(t, func(m *mSub) bool { return !m.cancelled })
	if m == nil {
		return
	}
	if rapid.Bool().Draw(t, "viaContext") {
		m.cancel()
		select {
		case <-m.s.Done():
		case <-time.After(waitFor):
			h.fatalf("subscriber %s: cancelling its context did not end it", m.opts.Name)
		}
	} else {
		m.s.Close()
		m.cancel()
	}
	m.cancelled, m.registered = true, false
	h.tally.Cancels++
}

// unsubscribe ends a live subscriber with Unsubscribe: the model delivers
// it nothing more, and it must still read everything queued before the
// call (finish reads it to its end), then end with ErrUnsubscribed. One
// that has already ended (evicted) keeps its reason.
func (h *harness) unsubscribe(t *rapid.T) {
	m := h.pickSub(t, func(m *mSub) bool { return m.registered && !m.unsubscribed })
	if m == nil {
		return
	}
	if ended(m.s) {
		m.s.Unsubscribe() // a no-op: the eviction stays the reason
		return
	}
	m.s.Unsubscribe()
	if err := m.s.Err(); !errors.Is(err, eventbus.ErrUnsubscribed) {
		h.fatalf("subscriber %s: Err after Unsubscribe %v", m.opts.Name, err)
	}
	m.registered, m.unsubscribed = false, true
	h.tally.Unsubscribes++
}

func (h *harness) clear(t *rapid.T) {
	id := rapid.SampledFrom(sessionNames).Draw(t, "session")
	err := h.bus.ClearReplayBuffer(id)
	x := h.sessions[id]
	switch {
	case x == nil: // closed or unknown: a no-op, as AgentPool's
		if err != nil {
			h.fatalf("clear closed or unknown %s: %v", id, err)
		}
	default:
		if err != nil {
			h.fatalf("clear %s: %v", id, err)
		}
		if len(x.ring) > 0 {
			x.evicted = max(x.evicted, x.ring[len(x.ring)-1].id)
		}
		x.ring = nil
	}
}

func (h *harness) closeSession(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "skipClose") != 0 {
		return // closing ends subscribers: keep it rarer
	}
	id := rapid.SampledFrom(sessionNames).Draw(t, "session")
	tree := rapid.IntRange(0, 2).Draw(t, "tree") == 0
	var err error
	if tree {
		err = h.bus.CloseSessionTree(id)
	} else {
		err = h.bus.CloseSession(id)
	}
	x := h.sessions[id]
	switch {
	case x == nil: // closed or unknown: a no-op, as AgentPool's
		if err != nil {
			h.fatalf("closing closed or unknown %s: %v", id, err)
		}
		return
	case err != nil:
		h.fatalf("closing %s: %v", id, err)
	}
	if !tree {
		h.closeOne(x)
		return
	}
	// Every session below x, however deep, children before their parent,
	// siblings in id order.
	var order []*mSession
	var visit func(y *mSession)
	visit = func(y *mSession) {
		kids := slices.Clone(y.children)
		slices.SortFunc(kids, func(a, b *mSession) int { return strings.Compare(a.id, b.id) })
		for _, c := range kids {
			visit(c)
		}
		order = append(order, y)
	}
	visit(x)
	for _, y := range order {
		h.closeOne(y)
	}
}

// closeOne applies CloseSession(x.id) to the model.
func (h *harness) closeOne(x *mSession) {
	id := x.id
	ev := h.append(x, frame.TypeSessionClosed, len(`{"session":"a","reason":"closed"}`))
	h.tally.SessionsClosed++
	rec := &closedRec{parent: x.parent, children: slices.Clone(x.children), lost: ev.id}
	if p := x.parent; p != nil {
		// Its buffer, and what it held, stay readable for p and above.
		for _, k := range x.kept {
			k.holder = p
			p.kept = append(p.kept, k)
		}
		k := &mKept{id: id, ring: x.ring, evicted: x.evicted, lastID: x.lastID, holder: p}
		p.kept = append(p.kept, k)
		h.keptBy[id] = k
		h.keptFIFO = append(h.keptFIFO, k)
		h.tally.Kept++
		for len(h.keptFIFO) > h.maxKept {
			h.dropKept(h.keptFIFO[0])
		}
	} else {
		// A root: what it held goes, and so does its own buffer.
		for len(x.kept) > 0 {
			h.dropKept(x.kept[len(x.kept)-1])
		}
		h.allLost = max(h.allLost, ev.id)
	}
	x.kept = nil
	// The children move up to x's parent: the tree stays connected.
	if x.parent != nil && len(x.children) > 0 {
		h.tally.MovedUp++
	}
	for _, c := range x.children {
		c.parent = x.parent
		if x.parent != nil {
			x.parent.children = append(x.parent.children, c)
		}
	}
	h.closed = append(h.closed, rec)
	if p := x.parent; p != nil {
		p.children = slices.DeleteFunc(p.children, func(c *mSession) bool { return c == x })
	}
	delete(h.sessions, id)
	h.tombs[id] = true
	h.lostByID[id] = ev.id
	for _, m := range h.subs {
		if m.session == id && m.registered {
			m.registered, m.sessionClosed = false, true
		}
	}
}

// checkState compares the bus's registrations and sessions with the model.
func (h *harness) checkState(t *rapid.T) {
	wantCounts := map[string]int{}
	for _, m := range h.subs {
		// Evicted subscribers are the only ones the model cannot see
		// end; they have ended (Done closed) and must be gone.
		if m.registered && !ended(m.s) {
			wantCounts[m.session]++
		}
	}
	if got := testkit.SubscriberCounts(h.bus); !mapsEqual(got, wantCounts) {
		h.fatalf("SubscriberCounts %v, model %v", got, wantCounts)
	}
	type info struct {
		parent   string
		buffered int
		last     uint64
	}
	got := map[string]info{}
	for _, s := range h.bus.Sessions() {
		got[s.ID] = info{s.Parent, s.Buffered, s.LastEventID}
	}
	wantS := map[string]info{}
	for id, x := range h.sessions {
		i := info{buffered: len(x.ring), last: x.lastID}
		if x.parent != nil {
			i.parent = x.parent.id
		}
		wantS[id] = i
	}
	if !mapsEqual(got, wantS) {
		h.fatalf("Sessions %v, model %v", got, wantS)
	}
	if got := h.bus.Stats().Retained; got != len(h.keptBy) {
		h.fatalf("Stats().Retained %d, model %d", got, len(h.keptBy))
	}
	if got := h.bus.LastEventID(); got != h.nextID-1 {
		h.fatalf("LastEventID %d, model %d", got, h.nextID-1)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// finish reads every subscriber to its end: first what Next-mode readers
// have queued, then, after Bus.Close, everything through Events.
func (h *harness) finish() {
	for _, m := range h.subs {
		if m.cancelled || m.eventsMode {
			continue
		}
		for {
			ev, ok := m.s.TryNext()
			if !ok {
				break
			}
			m.feed(ev)
		}
		if m.sessionClosed && !m.evicted {
			if err := m.s.Err(); !errors.Is(err, eventbus.ErrSessionClosed) {
				h.fatalf("subscriber %s of closed %s: Err %v", m.opts.Name, m.session, err)
			}
		}
	}
	if st := h.bus.Stats(); st.Guarded != 0 {
		h.fatalf("the reinsert guard skipped %d events", st.Guarded)
	}
	if err := h.bus.Close(); err != nil {
		h.fatalf("Close: %v", err)
	}
	h.tally.Cases++
	h.tally.Events += int(h.nextID - 1)
	for _, m := range h.subs {
		if m.cancelled {
			continue
		}
		for ev := range m.s.Events() {
			m.feed(ev)
		}
		m.end(m.s.Err())
	}
	for _, m := range h.subs {
		m.cancel()
	}
}

// want is one expected head frame: a replayed event or a synthetic frame.
type want struct {
	event    mEvent
	frame    string
	resync   *frame.ResyncData
	complete *frame.ReplayCompleteData
}

// mSub is one subscriber: its real Subscription, what the model expects of
// it, and how far the check has come.
type mSub struct {
	h       *harness
	s       *eventbus.Subscription
	cancel  context.CancelFunc
	session string
	kind    scope.Kind
	opts    eventbus.SubscribeOptions

	limited    bool
	policy     eventbus.OverflowPolicy
	warnOn     bool
	eventsMode bool

	registered    bool // the model still delivers live events to it
	cancelled     bool
	sessionClosed bool
	unsubscribed  bool // ended with Unsubscribe while live

	head    []want
	live    []uint64
	hi, ptr int    // progress through head and live
	last    uint64 // the last id it received
	evicted bool
}

func (m *mSub) fail(ev eventbus.Event, format string, args ...any) {
	m.h.t.Helper()
	m.h.fatalf("subscriber %s (%s on %s, %+v): frame %s %d %s: %s", m.opts.Name, m.kind, m.session, m.opts,
		ev.Type, ev.ID, ev.Data, fmt.Sprintf(format, args...))
}

func (m *mSub) feed(ev eventbus.Event) {
	m.h.t.Helper()
	m.h.tally.count(ev, m)
	if m.evicted {
		m.fail(ev, "frame after client_evicted")
	}
	if m.hi < len(m.head) {
		w := m.head[m.hi]
		m.hi++
		switch {
		case w.frame == "":
			if ev.ID != w.event.id || !ev.Replay || ev.Session != w.event.session || ev.Type != w.event.typ || len(ev.Data) != w.event.size {
				m.fail(ev, "want replayed %+v (head %d)", w.event, m.hi-1)
			}
		case ev.Type != w.frame || ev.ID != 0 || ev.Replay || ev.Session != m.session:
			m.fail(ev, "want frame %s (head %d)", w.frame, m.hi-1)
		case w.resync != nil:
			if got := decodeP[frame.ResyncData](m, ev); got != *w.resync {
				m.fail(ev, "want %+v", *w.resync)
			}
		case w.complete != nil:
			if got := decodeP[frame.ReplayCompleteData](m, ev); got != *w.complete {
				m.fail(ev, "want %+v", *w.complete)
			}
		}
		return
	}
	switch {
	case ev.ID != 0:
		if m.ptr >= len(m.live) || ev.ID != m.live[m.ptr] {
			m.fail(ev, "want live %v", m.live[m.ptr:])
		}
		w := m.h.events[ev.ID]
		if ev.Replay || ev.Session != w.session || ev.Type != w.typ || len(ev.Data) != w.size {
			m.fail(ev, "want live %+v", w)
		}
		m.ptr++
		m.last = ev.ID
	case ev.Type == frame.TypeSlowClientWarning:
		if !m.limited || !m.warnOn {
			m.fail(ev, "warning for a subscriber without small limits or with warnings off")
		}
		w := decodeP[frame.SlowClientWarningData](m, ev)
		if !slices.Contains([]string{"frames", "bytes", "frames_and_bytes"}, w.Threshold) || w.MaxQueued != m.opts.MaxQueued {
			m.fail(ev, "bad warning")
		}
	case ev.Type == frame.TypeStateResyncRequired:
		d := decodeP[frame.ResyncData](m, ev)
		if !m.limited || d.Reason != frame.ReasonEventsDropped {
			m.fail(ev, "unexpected resync in the live part")
		}
		if d.LastDeliveredID != m.last {
			m.fail(ev, "lastDeliveredId: the subscriber's last id is %d", m.last)
		}
		if m.ptr >= len(m.live) || d.FirstDroppedID != m.live[m.ptr] {
			m.fail(ev, "firstDroppedId: next expected %v", m.live[m.ptr:])
		}
		j := slices.Index(m.live[m.ptr:], d.LastDroppedID)
		if j < 0 || d.DroppedCount != j+1 {
			m.fail(ev, "range/count: expected ids %v", m.live[m.ptr:])
		}
		for _, id := range m.live[m.ptr : m.ptr+j+1] {
			e := m.h.events[id]
			if e.typ == frame.TypeSessionClosed {
				m.fail(ev, "session_closed %d was dropped", id)
			}
			if m.policy == eventbus.DropSubscriber && e.typ != "delta" {
				m.fail(ev, "drop_subscriber dropped %d of type %s", id, e.typ)
			}
		}
		m.ptr += j + 1
	case ev.Type == frame.TypeClientEvicted:
		d := decodeP[frame.ClientEvictedData](m, ev)
		if !m.limited || m.policy != eventbus.DropSubscriber {
			m.fail(ev, "eviction under policy %s", m.policy)
		}
		if m.ptr >= len(m.live) || d.DroppedAfter != m.live[m.ptr] {
			m.fail(ev, "droppedAfter: next expected %v", m.live[m.ptr:])
		}
		if d.MaxQueued != m.opts.MaxQueued {
			m.fail(ev, "maxQueued")
		}
		m.evicted = true
	default:
		m.fail(ev, "unexpected frame in the live part")
	}
}

// end checks the end of a stream read to its close.
func (m *mSub) end(err error) {
	m.h.t.Helper()
	var wantErr error
	switch {
	case m.evicted:
		wantErr = eventbus.ErrEvicted
	case m.sessionClosed:
		wantErr = eventbus.ErrSessionClosed
	case m.unsubscribed:
		wantErr = eventbus.ErrUnsubscribed
	default:
		wantErr = eventbus.ErrClosed
	}
	if !errors.Is(err, wantErr) {
		m.h.fatalf("subscriber %s ended with %v, want %v", m.opts.Name, err, wantErr)
	}
	if m.evicted {
		return
	}
	if m.sessionClosed {
		m.h.tally.SessionClosedEnds++
	}
	if m.hi != len(m.head) || m.ptr != len(m.live) {
		m.h.fatalf("subscriber %s (%s on %s, %+v) ended early: head %d/%d, live %v of %v",
			m.opts.Name, m.kind, m.session, m.opts, m.hi, len(m.head), m.live[:m.ptr], m.live)
	}
}

func decodeP[T any](m *mSub, ev eventbus.Event) T {
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		m.fail(ev, "decoding: %v", err)
	}
	return v
}

func (c *propTally) count(ev eventbus.Event, m *mSub) {
	c.Frames++
	switch {
	case ev.Replay:
		c.Replayed++
	case ev.Type == frame.TypeSlowClientWarning:
		c.Warnings++
	case ev.Type == frame.TypeClientEvicted:
		c.Evictions++
	case ev.Type == frame.TypeStateResyncRequired:
		switch decodeP[frame.ResyncData](m, ev).Reason {
		case frame.ReasonEventsDropped:
			c.Drops++
		case frame.ReasonRingEvicted:
			c.RingEvicted++
		case frame.ReasonEpochReset:
			c.EpochResets++
		case frame.ReasonReplayBudgetExceeded:
			c.Budget++
		}
	}
}
