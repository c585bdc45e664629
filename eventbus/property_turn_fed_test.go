package eventbus_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// TestPropertyTurnsAcrossNodes drives three bus nodes over the in-process
// cluster backend (one log, leases that a kill expires: every surviving
// node announces each lost turn, twice) through random sequences of turn
// starts on any node, Ends (nil or an error), Cancels from any node (by
// id, of a session's active turns, cascading from the root), node deaths
// (SIGKILL-like: no goodbye), and races of the three — an End, a Cancel
// from another node and the death of the producer's node at once. Over a
// root r and its child k, it checks at the end (every live producer has
// ended its turn): every live node stores the same turn records; per
// session, turns alternate start/end, each turn exactly one turn_end
// after its turn_start, none without a start; a turn whose node died
// before it ended is ended producer_lost, cancelled or by its End; for
// every turn of a live node, End returned the stored end, and its
// context was cancelled iff that end is cancelled or producer_lost.
func TestPropertyTurnsAcrossNodes(t *testing.T) {
	t.Parallel()
	var tally struct{ Cases, Turns, Lost, Cancelled, Races, Kills int }
	rapid.Check(t, func(rt *rapid.T) {
		if tally.Cases >= *nodeChecks {
			return // the budget of make test (see nodeChecks)
		}
		h := newFedTurnHarness(rt)
		defer h.close()
		tally.Cases++
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 5).Draw(rt, "action") {
			case 0, 1:
				h.start(rt)
			case 2:
				h.end(rt)
			case 3:
				h.cancel(rt, h.liveNode(rt))
			case 4:
				h.race(rt)
				tally.Races++
			case 5:
				h.kill(rt)
			}
		}
		h.finish(rt)
		tally.Turns += len(h.turns)
		for _, ft := range h.turns {
			switch ft.reason {
			case frame.ReasonProducerLost:
				tally.Lost++
			case frame.ReasonCancelled:
				tally.Cancelled++
			}
		}
		tally.Kills += 3 - len(h.live())
	})
	t.Logf("%+v", tally)
}

// nodeChecks bounds TestPropertyTurnsAcrossNodes's cases (each starts
// three nodes): the later cases of a rapid run pass at once. make test
// runs 200 (about 2 s), make property as many as -rapid.checks.
var nodeChecks = flag.Int("property.nodechecks", 200, "cases of TestPropertyTurnsAcrossNodes run in full (at most -rapid.checks)")

// fedTurn is one turn the harness started.
type fedTurn struct {
	t      *eventbus.Turn
	node   int
	ended  eventbus.Event // what End returned, ID 0 when it did not
	reason string         // the stored end's, set by finish
}

type fedTurnHarness struct {
	c     *cluster
	buses []*eventbus.Bus
	nodes []*node
	dead  []bool
	turns []*fedTurn
}

var fedSessions = []string{"r", "k"}

func newFedTurnHarness(rt *rapid.T) *fedTurnHarness {
	h := &fedTurnHarness{c: newCluster()}
	for i := range 3 {
		b, n, err := h.c.start(fmt.Sprintf("n%d", i), eventbus.Options{ReplayBufferSize: 10_000})
		mustOK(rt, err)
		h.buses, h.nodes, h.dead = append(h.buses, b), append(h.nodes, n), append(h.dead, false)
	}
	mustOK(rt, h.buses[0].CreateSession("r", ""))
	mustOK(rt, h.buses[0].CreateSession("k", "r"))
	h.sync(rt)
	return h
}

func (h *fedTurnHarness) close() {
	for _, b := range h.buses {
		_ = b.Close()
	}
}

// live returns the indexes of the nodes alive.
func (h *fedTurnHarness) live() []int {
	var out []int
	for i, d := range h.dead {
		if !d {
			out = append(out, i)
		}
	}
	return out
}

func (h *fedTurnHarness) liveNode(rt *rapid.T) int {
	return rapid.SampledFrom(h.live()).Draw(rt, "node")
}

// sync waits until every live node has ingested the whole log.
func (h *fedTurnHarness) sync(rt *rapid.T) {
	deadline := time.Now().Add(waitFor)
	for {
		n, ok := h.c.logLen(), true
		for _, i := range h.live() {
			if h.buses[i].LastEventID() < n {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("the nodes do not catch up with the log (%d events)", n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// start starts a turn on a live node in a session that node sees idle.
func (h *fedTurnHarness) start(rt *rapid.T) {
	i := h.liveNode(rt)
	s := rapid.SampledFrom(fedSessions).Draw(rt, "session")
	tr, err := h.buses[i].StartTurn(context.Background(), s, eventbus.TurnOptions{})
	if errors.Is(err, eventbus.ErrTurnActive) {
		return
	}
	mustOK(rt, err)
	h.turns = append(h.turns, &fedTurn{t: tr, node: i})
}

// running returns the turns of live nodes whose producer has not ended them.
func (h *fedTurnHarness) running() []*fedTurn {
	var out []*fedTurn
	for _, ft := range h.turns {
		if !h.dead[ft.node] && ft.ended.ID == 0 {
			out = append(out, ft)
		}
	}
	return out
}

// endTurn ends ft as its producer does: complete or error.
func (h *fedTurnHarness) endTurn(ft *fedTurn, fail bool) error {
	var cause error
	if fail {
		cause = errors.New("model failed")
	}
	ev, err := ft.t.End(cause)
	if err == nil {
		ft.ended = ev
	}
	return err
}

func (h *fedTurnHarness) end(rt *rapid.T) {
	run := h.running()
	if len(run) == 0 {
		return
	}
	ft := rapid.SampledFrom(run).Draw(rt, "turn")
	mustOK(rt, h.endTurn(ft, rapid.Bool().Draw(rt, "fail")))
}

// cancel sends a cancel from node i: by a turn's id, of a session's
// active turns, or cascading from the root. A turn it names that has
// ended is refused (ErrTurnEnded), which is no failure.
func (h *fedTurnHarness) cancel(rt *rapid.T, i int) {
	s, d := "r", frame.TurnData{Cascade: true}
	switch rapid.IntRange(0, 2).Draw(rt, "cancel") {
	case 0:
		if len(h.turns) == 0 {
			return
		}
		ft := rapid.SampledFrom(h.turns).Draw(rt, "cancelTurn")
		s, d = ft.t.Start().Session, frame.TurnData{Turn: ft.t.ID()}
	case 1:
		s, d = rapid.SampledFrom(fedSessions).Draw(rt, "cancelSession"), frame.TurnData{}
	}
	_, err := h.buses[i].Cancel(context.Background(), s, d)
	if err != nil && !errors.Is(err, eventbus.ErrTurnEnded) {
		rt.Fatalf("Cancel(%s, %+v) on n%d: %v", s, d, i, err)
	}
}

// kill kills a live node, leaving at least one.
func (h *fedTurnHarness) kill(rt *rapid.T) {
	if len(h.live()) < 2 {
		return
	}
	i := h.liveNode(rt)
	h.dead[i] = true
	h.killNode(i)
}

// killNode kills node i: the cluster expires its leases, and its bus
// closes (a dead process waits for nothing: its calls in flight return).
func (h *fedTurnHarness) killNode(i int) {
	h.c.kill(h.nodes[i])
	_ = h.buses[i].Close()
}

// race runs at once the End of a running turn, a Cancel of it from
// another live node and (maybe) the death of its node.
func (h *fedTurnHarness) race(rt *rapid.T) {
	run := h.running()
	if len(run) == 0 {
		return
	}
	ft := rapid.SampledFrom(run).Draw(rt, "raceTurn")
	from := h.liveNode(rt)
	fail := rapid.Bool().Draw(rt, "raceFail")
	die := len(h.live()) > 1 && rapid.Bool().Draw(rt, "raceKill")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- h.endTurn(ft, fail) })
	wg.Go(func() {
		_, err := h.buses[from].Cancel(context.Background(), ft.t.Start().Session, frame.TurnData{Turn: ft.t.ID()})
		if errors.Is(err, eventbus.ErrTurnEnded) {
			err = nil
		}
		errs <- err
	})
	if die {
		h.dead[ft.node] = true
		wg.Go(func() { h.killNode(ft.node) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// A dead node's End and Cancel fail (the backend refuses them).
		if err != nil && !(die && (errors.Is(err, errKilled) || errors.Is(err, eventbus.ErrClosed) || ft.node == from)) {
			rt.Fatalf("race: %v", err)
		}
	}
}

// finish ends every running turn, waits until no node shows an active
// turn, and checks the logs.
func (h *fedTurnHarness) finish(rt *rapid.T) {
	for _, ft := range h.running() {
		mustOK(rt, h.endTurn(ft, false))
	}
	deadline := time.Now().Add(waitFor)
	for {
		h.sync(rt)
		idle := true
		for _, i := range h.live() {
			for _, s := range fedSessions {
				if _, ok := h.buses[i].Turn(s, ""); ok {
					idle = false
				}
			}
		}
		if idle {
			break
		}
		if time.Now().After(deadline) {
			rt.Fatalf("turns left active")
		}
		time.Sleep(50 * time.Microsecond)
	}
	time.Sleep(time.Millisecond) // late announcements of a lost turn land (refused)
	h.sync(rt)

	var first []eventbus.Event
	for n, i := range h.live() {
		s, err := h.buses[i].Subscribe(context.Background(), "r", eventbus.SubscribeOptions{Scope: scope.Descendants, RequireSession: true})
		mustOK(rt, err)
		evs := drain(s)
		s.Close()
		if n == 0 {
			first = evs
			continue
		}
		if got, want := turnLog(evs), turnLog(first); fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("node n%d stores %v, node n%d %v", i, got, h.live()[0], want)
		}
	}
	ends := map[string]eventbus.Event{}
	active := map[string]string{} // session → its active turn in the log
	for _, ev := range first {
		switch ev.Type {
		case frame.TypeTurnStart:
			d := decode[frame.TurnData](nil, ev)
			if a := active[ev.Session]; a != "" {
				rt.Fatalf("turn %s starts while %s is active in %s", d.Turn, a, ev.Session)
			}
			active[ev.Session] = d.Turn
		case frame.TypeTurnEnd:
			d := decode[frame.TurnData](nil, ev)
			if active[ev.Session] != d.Turn {
				rt.Fatalf("turn_end of %s in %s, whose active turn is %q", d.Turn, ev.Session, active[ev.Session])
			}
			active[ev.Session] = ""
			if _, twice := ends[d.Turn]; twice {
				rt.Fatalf("second turn_end of %s", d.Turn)
			}
			ends[d.Turn] = ev
		}
	}
	for _, ft := range h.turns {
		end, ok := ends[ft.t.ID()]
		if !ok {
			rt.Fatalf("turn %s (node n%d) has no turn_end", ft.t.ID(), ft.node)
		}
		ft.reason = decode[frame.TurnData](nil, end).Reason
		if h.dead[ft.node] {
			continue // its bus saw nothing after the kill
		}
		if ft.ended.ID != end.ID {
			rt.Fatalf("turn %s: End returned %d, the log's end is %d", ft.t.ID(), ft.ended.ID, end.ID)
		}
		stopped := ft.t.Context().Err() != nil
		if want := ft.reason == frame.ReasonCancelled || ft.reason == frame.ReasonProducerLost; stopped != want {
			rt.Fatalf("turn %s ended %s: context cancelled %v", ft.t.ID(), ft.reason, stopped)
		}
	}
}
