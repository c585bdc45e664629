package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/scope"
)

// The frontend protocols' routes (docs/frontends.md).
const (
	// ChatAPI is the AI SDK chat route: POST, GET {id}/stream, POST {id}/stop.
	ChatAPI = aisdk.DefaultAPI
	// AGUIPath is the AG-UI route: POST, GET {id}/stream.
	AGUIPath = agui.DefaultPath
	// A2APath is the A2A JSON-RPC endpoint; its agent card is at
	// a2a.CardPath.
	A2APath = a2a.DefaultPath
)

// startTurn starts the simulated model's turn answering text on session
// for a frontend route (turn: its id, "" generated), with the route's
// errors: 503 unavailable after StopAgents.
func (s *Server) startTurn(session, text, turn string) (string, error) {
	t, err := s.startAgent(session, text, turn)
	if errors.Is(err, errShuttingDown) {
		return "", &resume.StatusError{Status: http.StatusServiceUnavailable, Code: resume.CodeUnavailable,
			Message: "the agent server is shutting down", RetryAfter: RetryAfterUnavailable * time.Second}
	}
	if err != nil {
		return "", err
	}
	return t.ID(), nil
}

// frontendID admits a frontend request's session id (the chat id, the
// thread id, the contextId) by the server's one validation, checkID, as
// its Authorize hook: a session those routes create must be reachable by
// its URL, and the AI SDK's resume URL ({api}/{chatId}/stream) cannot
// carry "." or "..". 400 invalid_session_id, before anything is created.
func frontendID(_ *http.Request, session string, _ scope.Kind) error {
	if msg := checkID("session id", session); msg != "" {
		return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidSessionID, Message: msg}
	}
	return nil
}

// mountFrontends mounts the AI SDK chat routes at ChatAPI, AG-UI at
// AGUIPath, A2A at A2APath with its agent card; their body bound is the
// server's (its write deadline leaves room for a 408 at BodyTimeout).
func (s *Server) mountFrontends() error {
	ai, err := aisdk.NewHandler(s.bus, aisdk.HandlerOptions{API: ChatAPI, BodyTimeout: s.bodyTimeout, Authorize: frontendID,
		Start: func(r *http.Request, m aisdk.Message) (string, error) { return s.startTurn(m.Chat, m.Text, "") }})
	if err != nil {
		return err
	}
	for _, p := range []string{"POST " + ChatAPI, "GET " + ChatAPI + "/{id}/stream", "POST " + ChatAPI + "/{id}/stop"} {
		s.handle(p, s.whenReady(ai.ServeHTTP))
	}
	ag, err := agui.NewHandler(s.bus, agui.HandlerOptions{Path: AGUIPath, BodyTimeout: s.bodyTimeout, Authorize: frontendID,
		Start: func(r *http.Request, in agui.Input) (string, error) { return s.startTurn(in.Thread, in.Text, in.Run) }})
	if err != nil {
		return err
	}
	for _, p := range []string{"POST " + AGUIPath, "GET " + AGUIPath + "/{id}/stream"} {
		s.handle(p, s.whenReady(ag.ServeHTTP))
	}
	aa, err := a2a.NewHandler(s.bus, a2a.HandlerOptions{Path: A2APath, BodyTimeout: s.bodyTimeout, Authorize: frontendID,
		Start: func(r *http.Request, m a2a.Message) (string, error) {
			return s.startTurn(m.Context, m.Request.Text, m.Turn)
		}})
	if err != nil {
		return err
	}
	s.handle("POST "+A2APath, s.whenReady(aa.ServeHTTP))
	s.handle("GET "+a2a.CardPath, a2a.CardHandler(a2a.Card{Name: "replaybus agentserver",
		Description: "The example server's simulated model: a reply derived from the text; \"stream N\" streams N text deltas and a tool call.",
		Version:     "1", URL: A2APath,
		Skills: []a2a.Skill{{ID: "reply", Name: "Reply", Description: "answers a message with reasoning, a search tool call and text", Tags: []string{"demo"}}}}))
	return nil
}
