package server

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/agent"
)

// errShuttingDown is the cause the agents' turns end with at shutdown.
var errShuttingDown = errors.New("agentserver: shutting down")

// agents runs the simulated model's replies, one goroutine per turn,
// under one context that StopAgents and Close end.
type agents struct {
	ctx  context.Context
	stop context.CancelCauseFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// start runs fn in a goroutine of its own, unless the agents were
// stopped (false).
func (a *agents) start(fn func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn()
	}()
	return true
}

// halt ends every turn of the agents (turn_end{cancelled}, "agentserver:
// shutting down") and refuses new ones.
func (a *agents) halt() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.stop(errShuttingDown)
}

// StopAgents stops the simulated model: every turn it runs ends
// (turn_end{cancelled} with the message "agentserver: shutting down"),
// POST /session/{id}/messages answers 503 from then on, and it waits until
// every reply's goroutine has returned, or ctx ends (its error). Call it
// before closing the bus, as the shutdown recipe stops every producer
// first. Idempotent.
func (s *Server) StopAgents(ctx context.Context) error {
	s.agents.halt()
	done := make(chan struct{})
	go func() {
		s.agents.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mountTurns mounts the turn routes of adapters/turns (cancel, turn,
// presence) with the server's id and backend checks, and the model's
// routes (messages, status).
func (s *Server) mountTurns() error {
	o := s.o.Turns
	if o.Logger == nil {
		o.Logger = s.log
	}
	o.PlainIDs = s.o.SSE.PlainIDs
	if o.BodyTimeout == 0 {
		// The server's bound on every body: its write deadline leaves
		// room for a 408 at BodyTimeout, not at the turns package's
		// default (a cancel's 408 came after the answer's deadline and
		// the connection closed without one).
		o.BodyTimeout = s.bodyTimeout
	}
	th, err := turns.NewHandler(s.bus, o)
	if err != nil {
		return err
	}
	s.turns = th
	s.handle(turns.CancelPattern, s.whenReady(func(w http.ResponseWriter, r *http.Request) {
		if validPathID(w, r) && checkQuery(w, r) {
			th.Cancel().ServeHTTP(w, r)
		}
	}))
	for _, rt := range []struct {
		pattern string
		h       http.Handler
	}{{turns.TurnPattern, th.Turn()}, {turns.PresencePattern, th.Presence()}} {
		s.handle(rt.pattern, s.whenReady(func(w http.ResponseWriter, r *http.Request) {
			if validPathID(w, r) {
				rt.h.ServeHTTP(w, r)
			}
		}))
	}
	s.handle("POST /session/{id}/messages", s.whenReady(s.postMessage))
	s.handle("PUT /session/{id}/status", s.whenReady(s.putStatus))
	return nil
}

// Turns returns the turn routes' handler, for its [turns.Handler.Stats].
func (s *Server) Turns() *turns.Handler { return s.turns }

type messageRequest struct {
	Text string `json:"text"`
	Turn string `json:"turn"` // "": generated
}

// messageAnswer is the answer of POST /session/{id}/messages: the turn,
// and where a stream reads it from its start.
type messageAnswer struct {
	Turn    string `json:"turn"`
	StartID uint64 `json:"startId"`
	Cursor  string `json:"cursor"`
	Epoch   string `json:"epoch"`
}

// postMessage is POST /session/{id}/messages: {"text", "turn"?} starts a
// turn of the simulated model (202 {"turn", "startId", "cursor", "epoch"}),
// whose reply Run publishes in the background.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	var req messageRequest
	if !validPathID(w, r) || !checkQuery(w, r) || !s.readBody(w, r, &req, false) {
		return
	}
	id := r.PathValue("id")
	if req.Turn != "" {
		if err := frame.CheckName("turn id", req.Turn); err != nil {
			writeError(w, http.StatusBadRequest, resume.CodeInvalidTurnID, "invalid turn: "+err.Error())
			return
		}
	}
	t, err := s.startAgent(id, req.Text, req.Turn)
	if err != nil {
		if errors.Is(err, errShuttingDown) {
			writeUnavailable(w, errShuttingDown)
			return
		}
		if errors.Is(err, eventbus.ErrInvalid) {
			resume.WriteError(w, err, id)
			return
		}
		s.writeSessionError(w, err, id)
		return
	}
	a := s.answer(t.Start().ID-1, false)
	writeJSON(w, http.StatusAccepted, messageAnswer{Turn: t.ID(), StartID: t.Start().ID, Cursor: a.Cursor, Epoch: a.Epoch})
}

// startAgent starts a turn of the simulated model on session id answering
// text (turn: its id, "" generated) and runs the reply in the
// background. Errors: agent.Plan's (eventbus.ErrInvalid), StartTurn's,
// errShuttingDown after StopAgents.
func (s *Server) startAgent(id, text, turn string) (*eventbus.Turn, error) {
	reply, err := agent.Plan(text)
	if err != nil {
		return nil, err
	}
	t, err := s.bus.StartTurn(s.agents.ctx, id, eventbus.TurnOptions{ID: turn})
	if err != nil {
		if s.agents.ctx.Err() != nil {
			return nil, errShuttingDown
		}
		return nil, err
	}
	if !s.agents.start(func() {
		if err := reply.Run(t, s.o.AgentRate); err != nil {
			s.log.Warn("agent reply failed", "session", id, "turn", t.ID(), "error", err)
		}
	}) {
		_, _ = t.End(errShuttingDown)
		return nil, errShuttingDown
	}
	return t, nil
}

type statusRequest struct {
	Status string `json:"status"`
}

// putStatus is PUT /session/{id}/status: {"status"} sets the agent status
// of the session (eventbus.Bus.SetStatus) for a producer that runs
// elsewhere and publishes with POST /session/{id}/events → 204.
func (s *Server) putStatus(w http.ResponseWriter, r *http.Request) {
	var req statusRequest
	if !validPathID(w, r) || !checkQuery(w, r) || !s.readBody(w, r, &req, false) {
		return
	}
	if err := s.bus.SetStatus(r.PathValue("id"), req.Status); err != nil {
		s.writeSessionError(w, err, r.PathValue("id"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
