package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// TestPropertyTurns drives random sequences of StartTurn (fresh ids, the
// id of a held cancel, a reused ended id), Turn.Publish, End (nil or an
// error), Cancel (by id, a session's active turns, cascade, an id not yet
// started), the end of a producer's context, CloseSession, and races —
// End against Cancel, End against its context, two Cancels, End against
// Bus.Close — over a tree r > c > g and a root o, against a model of the
// turn contract: at most one active turn per session, the reason each
// turn ends with (for a race, the one the API answers name, which must
// agree with each other), held cancels (16 per session) and the ended
// turns a session remembers (every one: the replay buffer of 10,000
// holds every turn_end of a run). Every step checks Turn(s, ""); at the end
// (Bus.Close ends what is left as producer_lost) it checks, for every
// subscriber — "all", descendants of r, session o, and an "all" one that
// joins at the end and reads it all from the replay: exactly one turn_start
// and one turn_end per turn, no turn_end of a turn never started,
// turn_start before the turn's events before its turn_end, the turn_end
// after the turn_cancel that caused it, the reason the model predicts;
// and for every turn that its context was cancelled iff it ended
// cancelled or producer_lost, and that End returned the logged end.
func TestPropertyTurns(t *testing.T) {
	t.Parallel()
	var tally turnTally
	rapid.Check(t, func(rt *rapid.T) {
		h := newTurnHarness(rt)
		h.tally = &tally
		defer h.bus.Close()
		rt.Repeat(map[string]func(*rapid.T){
			"start":       h.start,
			"start2":      h.start,
			"publish":     h.publish,
			"publish2":    h.publish,
			"end":         h.end,
			"end2":        h.end,
			"cancel":      h.cancel,
			"cancel2":     h.cancel,
			"ctxEnd":      h.ctxEnd,
			"raceEnd":     h.raceEndCancel,
			"raceCtx":     h.raceEndCtx,
			"raceCancels": h.raceCancels,
			"close":       h.closeSession,
			"":            h.checkActive,
		})
		h.finish(rt)
	})
	t.Logf("%+v", tally)
}

// turnTally counts what the property test exercised (-v).
type turnTally struct {
	Cases, Turns, Complete, Errors, Cancelled, Lost, Held, HeldApplied, Cascades, Races, RacesCancelWon int
}

// mTurn is the model of one turn.
type mTurn struct {
	t       *eventbus.Turn
	stop    context.CancelFunc // StartTurn's context
	session string
	id      string
	reason  string // "" while active
	cancel  uint64 // id of the turn_cancel that ended it, 0 none
	end     uint64 // the end End returned, 0 when not asked
	events  int    // published in the turn
}

type turnHarness struct {
	bus     *eventbus.Bus
	all     *eventbus.Subscription // scope all
	desc    *eventbus.Subscription // scope descendants of r
	own     *eventbus.Subscription // scope session of o
	parent  map[string]string      // open sessions → parent ("" root)
	closed  map[string]bool
	turns   []*mTurn
	active  map[string]*mTurn   // session → its active turn
	ended   map[string][]string // session → its ended turn ids, newest last
	held    map[string][]string // session → held cancel ids, oldest first, at most 16
	next    int
	tally   *turnTally
	started int
}

func newTurnHarness(rt *rapid.T) *turnHarness {
	b, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10_000})
	if err != nil {
		rt.Fatal(err)
	}
	h := &turnHarness{bus: b, parent: map[string]string{"r": "", "c": "r", "g": "c", "o": ""},
		closed: map[string]bool{}, active: map[string]*mTurn{}, ended: map[string][]string{}, held: map[string][]string{}}
	for _, s := range []string{"r", "c", "g", "o"} {
		mustOK(rt, b.CreateSession(s, h.parent[s]))
	}
	big := eventbus.SubscribeOptions{MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30, NoReplay: true}
	h.all, err = b.Subscribe(context.Background(), "o", eventbus.SubscribeOptions{Scope: scope.All, MaxQueued: big.MaxQueued, MaxQueuedBytes: big.MaxQueuedBytes, NoReplay: true})
	mustOK(rt, err)
	big.Scope = scope.Descendants
	h.desc, err = b.Subscribe(context.Background(), "r", big)
	mustOK(rt, err)
	big.Scope = scope.Session
	h.own, err = b.Subscribe(context.Background(), "o", big)
	mustOK(rt, err)
	return h
}

func mustOK(rt *rapid.T, err error) {
	if err != nil {
		rt.Helper()
		rt.Fatalf("unexpected error: %v", err)
	}
}

// activeTurns returns the active turns, in a fixed order.
func (h *turnHarness) activeTurns() []*mTurn {
	var out []*mTurn
	for _, s := range []string{"r", "c", "g", "o"} {
		if m := h.active[s]; m != nil {
			out = append(out, m)
		}
	}
	return out
}

// endModel records that m ended with reason.
func (h *turnHarness) endModel(m *mTurn, reason string) {
	m.reason = reason
	delete(h.active, m.session)
	h.ended[m.session] = append(h.ended[m.session], m.id)
	switch reason {
	case frame.ReasonComplete:
		h.tally.Complete++
	case frame.ReasonError:
		h.tally.Errors++
	case frame.ReasonCancelled:
		h.tally.Cancelled++
	case frame.ReasonProducerLost:
		h.tally.Lost++
	}
}

func (h *turnHarness) start(rt *rapid.T) {
	sessions := []string{"r", "c", "g", "o"}
	s := rapid.SampledFrom(sessions).Draw(rt, "session")
	h.next++
	id := fmt.Sprint("t", h.next)
	switch rapid.IntRange(0, 5).Draw(rt, "id") {
	case 0:
		if hs := h.held[s]; len(hs) > 0 {
			id = rapid.SampledFrom(hs).Draw(rt, "held")
		}
	case 1:
		if es := h.ended[s]; len(es) > 0 {
			id = rapid.SampledFrom(es).Draw(rt, "ended")
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	tr, err := h.bus.StartTurn(ctx, s, eventbus.TurnOptions{ID: id})
	switch {
	case h.closed[s]:
		expectErr(rt, err, eventbus.ErrSessionClosed)
	case h.active[s] != nil:
		expectErr(rt, err, eventbus.ErrTurnActive)
	case slices.Contains(h.ended[s], id):
		expectErr(rt, err, eventbus.ErrTurnEnded)
	default:
		mustOK(rt, err)
		m := &mTurn{t: tr, stop: stop, session: s, id: id}
		h.turns = append(h.turns, m)
		h.active[s] = m
		h.started++
		h.tally.Turns++
		if i := slices.Index(h.held[s], id); i >= 0 {
			h.held[s] = slices.Delete(h.held[s], i, i+1)
			h.endModel(m, frame.ReasonCancelled)
			m.cancel = 1 // a held cancel, before the start
			h.tally.HeldApplied++
			if !isDone(tr.Context()) {
				rt.Fatalf("turn %s started with a held cancel: its context is not done", id)
			}
		}
		return
	}
	stop()
}

func expectErr(rt *rapid.T, err, want error) {
	rt.Helper()
	if !errors.Is(err, want) {
		rt.Fatalf("got error %v, want %v", err, want)
	}
}

// pick draws one of the model's turns, nil when there is none.
func (h *turnHarness) pick(rt *rapid.T, activeOnly bool) *mTurn {
	ts := h.turns
	if activeOnly {
		ts = h.activeTurns()
	}
	if len(ts) == 0 {
		return nil
	}
	return ts[rapid.IntRange(0, len(ts)-1).Draw(rt, "turn")]
}

func (h *turnHarness) publish(rt *rapid.T) {
	m := h.pick(rt, false)
	if m == nil {
		return
	}
	_, err := m.t.Publish("msg", map[string]string{"turn": m.id})
	if m.reason == "" {
		mustOK(rt, err)
		m.events++
	} else {
		expectErr(rt, err, eventbus.ErrTurnEnded)
	}
}

func (h *turnHarness) end(rt *rapid.T) {
	m := h.pick(rt, false)
	if m == nil {
		return
	}
	var cause error
	want := frame.ReasonComplete
	if rapid.Bool().Draw(rt, "error") {
		cause, want = errors.New("boom"), frame.ReasonError
	}
	ev, err := m.t.End(cause)
	mustOK(rt, err)
	if m.reason == "" {
		h.endModel(m, want)
	}
	h.checkEnd(rt, m, ev)
}

// checkEnd checks the end End returned for m against the model.
func (h *turnHarness) checkEnd(rt *rapid.T, m *mTurn, ev eventbus.Event) {
	rt.Helper()
	d := turnData(rt, ev)
	if ev.Type != frame.TypeTurnEnd || d.Turn != m.id || d.Reason != m.reason {
		rt.Fatalf("End of %s returned %s %s, want reason %s", m.id, ev.Type, ev.Data, m.reason)
	}
	if m.end != 0 && m.end != ev.ID {
		rt.Fatalf("End of %s returned end %d, then %d", m.id, m.end, ev.ID)
	}
	m.end = ev.ID
}

// cancelTargets is the model of a cancel of session s: the turns it
// cancels, the id it holds ("" none), or the error it is refused with.
func (h *turnHarness) cancelTargets(s string, d frame.TurnData) (turns []*mTurn, held string, err error) {
	if h.closed[s] {
		return nil, "", eventbus.ErrSessionClosed
	}
	if d.Turn != "" {
		switch m := h.active[s]; {
		case m != nil && m.id == d.Turn:
			turns = append(turns, m)
		case slices.Contains(h.ended[s], d.Turn):
			return nil, "", eventbus.ErrTurnEnded
		default:
			held = d.Turn
		}
	} else if m := h.active[s]; m != nil {
		turns = append(turns, m)
	}
	if d.Cascade {
		for _, m := range h.activeTurns() {
			if m.session != s && h.below(m.session, s) {
				turns = append(turns, m)
			}
		}
	}
	return turns, held, nil
}

// below reports whether session x lies below session s.
func (h *turnHarness) below(x, s string) bool {
	for p := h.parent[x]; p != ""; p = h.parent[p] {
		if p == s {
			return true
		}
	}
	return false
}

// applyCancel applies a cancel's model outcome; id is the turn_cancel's
// id.
func (h *turnHarness) applyCancel(s string, turns []*mTurn, held string, id uint64) {
	for _, m := range turns {
		m.cancel = id
		h.endModel(m, frame.ReasonCancelled)
	}
	if held != "" {
		hs := slices.DeleteFunc(h.held[s], func(x string) bool { return x == held })
		hs = append(hs, held)
		if len(hs) > 16 {
			hs = hs[1:]
		}
		h.held[s] = hs
		h.tally.Held++
	}
}

func (h *turnHarness) cancel(rt *rapid.T) {
	s := rapid.SampledFrom([]string{"r", "c", "g", "o"}).Draw(rt, "session")
	var d frame.TurnData
	switch rapid.IntRange(0, 3).Draw(rt, "mode") {
	case 0:
		if m := h.pick(rt, false); m != nil {
			d.Turn = m.id
		}
	case 1:
		h.next++
		d.Turn = fmt.Sprint("t", h.next) // not started yet: held
	case 2:
		d.Cascade = true
		h.tally.Cascades++
	}
	turns, held, want := h.cancelTargets(s, d)
	last := h.bus.LastEventID()
	res, err := h.bus.Cancel(context.Background(), s, d)
	if want != nil {
		expectErr(rt, err, want)
		if h.bus.LastEventID() != last {
			rt.Fatalf("a refused cancel wrote to the log")
		}
		return
	}
	mustOK(rt, err)
	var ids []string
	for _, m := range turns {
		ids = append(ids, m.id)
	}
	if !sameSet(res.Cancelled, ids) || (held == "") != (len(res.Held) == 0) || held != "" && res.Held[0] != held {
		rt.Fatalf("Cancel(%s, %+v) = %+v, want cancelled %v held %q", s, d, res, ids, held)
	}
	h.applyCancel(s, turns, held, last+1)
	for _, m := range turns {
		if !isDone(m.t.Context()) {
			rt.Fatalf("turn %s cancelled, its context is not done when Cancel returns", m.id)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// waitDone waits (bounded) for ctx to end.
func waitDone(rt *rapid.T, ctx context.Context, what string) {
	select {
	case <-ctx.Done():
	case <-time.After(waitFor):
		rt.Fatalf("%s: context not done", what)
	}
}

func (h *turnHarness) ctxEnd(rt *rapid.T) {
	m := h.pick(rt, true)
	if m == nil {
		return
	}
	m.stop()
	waitDone(rt, m.t.Context(), m.id)
	h.endModel(m, frame.ReasonCancelled)
}

// raceEndCancel races End against a Cancel of the same turn: the answers
// name the winner, and must agree.
func (h *turnHarness) raceEndCancel(rt *rapid.T) {
	m := h.pick(rt, true)
	if m == nil {
		return
	}
	h.tally.Races++
	var (
		wg     sync.WaitGroup
		end    eventbus.Event
		endErr error
		res    eventbus.CancelResult
		err    error
	)
	last := h.bus.LastEventID()
	wg.Add(2)
	go func() { defer wg.Done(); end, endErr = m.t.End(nil) }()
	go func() {
		defer wg.Done()
		res, err = h.bus.Cancel(context.Background(), m.session, frame.TurnData{Turn: m.id})
	}()
	wg.Wait()
	mustOK(rt, endErr)
	if errors.Is(err, eventbus.ErrTurnEnded) {
		h.endModel(m, frame.ReasonComplete)
	} else {
		mustOK(rt, err)
		if !slices.Equal(res.Cancelled, []string{m.id}) {
			rt.Fatalf("racing Cancel of %s answered %+v", m.id, res)
		}
		h.tally.RacesCancelWon++
		m.cancel = last + 1 // the turn_cancel is the first record of the race
		h.endModel(m, frame.ReasonCancelled)
	}
	h.checkEnd(rt, m, end)
}

// raceEndCtx races End against the end of StartTurn's context.
func (h *turnHarness) raceEndCtx(rt *rapid.T) {
	m := h.pick(rt, true)
	if m == nil {
		return
	}
	h.tally.Races++
	var wg sync.WaitGroup
	var end eventbus.Event
	var err error
	wg.Add(2)
	go func() { defer wg.Done(); end, err = m.t.End(nil) }()
	go func() { defer wg.Done(); m.stop() }()
	wg.Wait()
	mustOK(rt, err)
	reason := turnData(rt, end).Reason
	if reason != frame.ReasonComplete && reason != frame.ReasonCancelled {
		rt.Fatalf("End racing its context returned %s", end.Data)
	}
	h.endModel(m, reason)
	h.checkEnd(rt, m, end)
}

// raceCancels races two cancels of a session's active turns: exactly one
// names the turn.
func (h *turnHarness) raceCancels(rt *rapid.T) {
	m := h.pick(rt, true)
	if m == nil {
		return
	}
	h.tally.Races++
	var wg sync.WaitGroup
	res := make([]eventbus.CancelResult, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = h.bus.Cancel(context.Background(), m.session, frame.TurnData{})
		}()
	}
	wg.Wait()
	mustOK(rt, errors.Join(errs...))
	if n := len(res[0].Cancelled) + len(res[1].Cancelled); n != 1 {
		rt.Fatalf("two racing cancels named %d turns: %+v", n, res)
	}
	h.applyCancel(m.session, []*mTurn{m}, "", 0) // by the first of the two records, or the second
}

func (h *turnHarness) closeSession(rt *rapid.T) {
	s := rapid.SampledFrom([]string{"c", "g"}).Draw(rt, "session")
	if h.closed[s] {
		return
	}
	mustOK(rt, h.bus.CloseSession(s))
	if m := h.active[s]; m != nil {
		h.endModel(m, frame.ReasonCancelled)
	}
	h.closed[s] = true
	for x, p := range h.parent {
		if p == s {
			h.parent[x] = h.parent[s]
		}
	}
	delete(h.parent, s)
}

func (h *turnHarness) checkActive(rt *rapid.T) {
	for _, s := range []string{"r", "c", "g", "o"} {
		got, ok := h.bus.Turn(s, "")
		m := h.active[s]
		if ok != (m != nil) || ok && (got.Turn != m.id || got.Session != s || got.StartID != m.t.Start().ID) {
			rt.Fatalf("Turn(%s, \"\") = %+v, %v; the model has %v", s, got, ok, m)
		}
	}
}

// finish closes the bus (racing an End when a turn is active) and checks
// every turn against the log read by both subscribers.
func (h *turnHarness) finish(rt *rapid.T) {
	h.checkActive(rt)
	h.tally.Cases++
	// A subscriber that joins now reads the history from the replay.
	late, err := h.bus.Subscribe(context.Background(), "o", eventbus.SubscribeOptions{Scope: scope.All,
		Cursor: eventbus.At(0), MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
	mustOK(rt, err)
	if m := h.pick(rt, true); m != nil && rapid.Bool().Draw(rt, "raceClose") {
		h.tally.Races++
		var wg sync.WaitGroup
		var end eventbus.Event
		var err error
		wg.Add(1)
		go func() { defer wg.Done(); end, err = m.t.End(nil) }()
		mustOK(rt, h.bus.Close())
		wg.Wait()
		mustOK(rt, err)
		h.endModel(m, turnData(rt, end).Reason)
		h.checkEnd(rt, m, end)
	}
	mustOK(rt, h.bus.Close())
	for _, m := range h.activeTurns() {
		h.endModel(m, frame.ReasonProducerLost)
	}
	st := h.bus.Stats()
	if int(st.TurnsStarted) != h.started || int(st.TurnsEnded) != h.started {
		rt.Fatalf("Stats: %d started, %d ended; the model started %d", st.TurnsStarted, st.TurnsEnded, h.started)
	}
	for _, m := range h.turns {
		lost := m.reason == frame.ReasonCancelled || m.reason == frame.ReasonProducerLost
		if isDone(m.t.Context()) != lost {
			rt.Fatalf("turn %s ended %s: context done %v", m.id, m.reason, isDone(m.t.Context()))
		}
		ev, err := m.t.End(nil)
		mustOK(rt, err)
		h.checkEnd(rt, m, ev)
		m.stop()
	}
	for _, sub := range []struct {
		name     string
		s        *eventbus.Subscription
		sessions []string
	}{
		{"all", h.all, []string{"r", "c", "g", "o"}},
		{"descendants of r", h.desc, []string{"r", "c", "g"}},
		{"session o", h.own, []string{"o"}},
		{"all, replayed", late, []string{"r", "c", "g", "o"}},
	} {
		evs, err := readAll(sub.s)
		if !errors.Is(err, eventbus.ErrClosed) {
			rt.Fatalf("%s: ended with %v", sub.name, err)
		}
		h.checkLog(rt, sub.name, evs, sub.sessions)
	}
}

// readAll reads s to its end.
func readAll(s *eventbus.Subscription) ([]eventbus.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out []eventbus.Event
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// checkLog checks what one subscriber of sessions read against the model.
func (h *turnHarness) checkLog(rt *rapid.T, name string, evs []eventbus.Event, sessions []string) {
	type seen struct {
		start, end uint64
		events     int
		reason     string
	}
	byTurn := map[[2]string]*seen{}
	cancels := map[uint64]bool{}
	var last uint64
	for _, ev := range evs {
		if ev.ID == 0 {
			continue // replay_complete
		}
		if ev.ID <= last {
			rt.Fatalf("%s: id %d after %d", name, ev.ID, last)
		}
		last = ev.ID
		switch ev.Type {
		case frame.TypeTurnStart, frame.TypeTurnEnd, "msg":
		case frame.TypeTurnCancel:
			cancels[ev.ID] = true
			continue
		default:
			continue
		}
		d := turnData(rt, ev)
		k := [2]string{ev.Session, d.Turn}
		x := byTurn[k]
		if x == nil {
			x = &seen{}
			byTurn[k] = x
		}
		switch ev.Type {
		case frame.TypeTurnStart:
			if x.start != 0 || x.events > 0 || x.end != 0 {
				rt.Fatalf("%s: turn_start of %v at %d comes late or twice", name, k, ev.ID)
			}
			x.start = ev.ID
		case "msg":
			if x.start == 0 || x.end != 0 {
				rt.Fatalf("%s: an event of turn %v at %d outside it (start %d, end %d)", name, k, ev.ID, x.start, x.end)
			}
			x.events++
		case frame.TypeTurnEnd:
			if x.start == 0 || x.end != 0 {
				rt.Fatalf("%s: turn_end of %v at %d without its start, or twice", name, k, ev.ID)
			}
			x.end, x.reason = ev.ID, d.Reason
		}
	}
	for _, m := range h.turns {
		if !slices.Contains(sessions, m.session) {
			continue
		}
		x := byTurn[[2]string{m.session, m.id}]
		if x == nil {
			rt.Fatalf("%s: turn %s of %s never seen", name, m.id, m.session)
		}
		delete(byTurn, [2]string{m.session, m.id})
		if x.end == 0 || x.reason != m.reason || x.events != m.events {
			rt.Fatalf("%s: turn %s of %s: end %d %q, %d events; the model says %q, %d events", name, m.id, m.session, x.end, x.reason, x.events, m.reason, m.events)
		}
		if m.end != 0 && m.end != x.end {
			rt.Fatalf("%s: turn %s: End returned %d, the log's end is %d", name, m.id, m.end, x.end)
		}
		if m.cancel > 1 && (!cancels[m.cancel] && len(sessions) == 4 || m.cancel > x.end) {
			rt.Fatalf("%s: turn %s ended at %d, its cancel %d is not before it", name, m.id, x.end, m.cancel)
		}
	}
	if len(byTurn) > 0 {
		rt.Fatalf("%s: turns in the log the model never started: %v", name, byTurn)
	}
}

// turnData decodes a turn record's (or a turn event's) payload.
func turnData(rt *rapid.T, ev eventbus.Event) frame.TurnData {
	var d frame.TurnData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		rt.Fatalf("decoding %s %s: %v", ev.Type, ev.Data, err)
	}
	return d
}
