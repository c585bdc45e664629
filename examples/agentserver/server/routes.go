package server

import (
	"net/http"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/browser"
	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/adapters/ws"
)

// Route is one route of a [Server]: its http.ServeMux pattern, the
// requests it takes and what it does, as the agentserver command's -h
// lists it.
type Route struct {
	Pattern string // as mounted, e.g. "GET /{$}"
	Request string // as a reader writes it, e.g. "GET /"
	Doc     string // one line
}

// Routes returns every route a [Server] answers, in the order -h lists
// them (the README's table says more of each).
func Routes() []Route {
	return []Route{
		{"GET /{$}", "GET /", "the page: watches a session live over SSE, or one WebSocket (?transport=ws)"},
		{"GET /static/", "GET /static/{file}", "the page's scripts and styles"},
		{browser.Pattern, browser.Pattern, "the browser client module (ETag, gzip: docs/browser.md)"},
		{"GET /healthz", "GET /healthz", "200 ok, or 503 with Retry-After while the bus's backend is down"},
		{"GET /info", "GET /info", "the epoch, the last id, the page's defaults, the counters of the bus, SSE, WebSocket, Durable Streams and turn routes"},
		{"GET /sessions", "GET /sessions", "every live session, sorted by id"},
		{"POST /sessions", "POST /sessions", `create a session: {"id"?, "parent"?} (an absent id is generated)`},
		{"POST /session/{id}/events", "POST /session/{id}/events", `publish: {"type", "data"?, "origin"?}; Producer-Id/-Epoch/-Seq make it idempotent`},
		{"DELETE /session/{id}", "DELETE /session/{id}", "close a session (?cascade=1: its descendants too)"},
		{"POST /session/{id}/messages", "POST /session/{id}/messages", `a message to the simulated model: {"text", "turn"?} starts a turn → 202 {"turn", …}; 409 turn_active`},
		{turns.CancelPattern, turns.CancelPattern, `the stop button: {"turn"?, "cascade"?} → 202 {"cancelled", "held"}; 409 turn_ended`},
		{turns.TurnPattern, turns.TurnPattern, `the active turn: 200 {"turn", "status", "startId", "cursor", …}, or 204 when none`},
		{turns.PresencePattern, turns.PresencePattern, `200 {"clients", "status", "turn"?}: who is attached, what the agent is doing`},
		{"PUT /session/{id}/status", "PUT /session/{id}/status", `set the agent status: {"status"} → 204 (idle, thinking, streaming, …)`},
		{"POST " + ChatAPI, "POST " + ChatAPI, `the AI SDK chat route (DefaultChatTransport, useChat): {id, messages, trigger, …} starts a turn → its UI-message stream (docs/frontends.md)`},
		{"GET " + ChatAPI + "/{id}/stream", "GET " + ChatAPI + "/{chatId}/stream", "the AI SDK resume: the active turn from its start, compacted, then live; 204 when none"},
		{"POST " + ChatAPI + "/{id}/stop", "POST " + ChatAPI + "/{chatId}/stop", `the AI SDK stop: cancel the chat's turn → 202 {"cancelled", "held"}`},
		{"POST " + AGUIPath, "POST " + AGUIPath, "AG-UI (HttpAgent): a RunAgentInput starts a turn → the run as AG-UI events with ids; with Last-Event-ID the run continued after it"},
		{"GET " + AGUIPath + "/{id}/stream", "GET " + AGUIPath + "/{threadId}/stream", "AG-UI resume (Last-Event-ID) or join: RUN_STARTED, MESSAGES_SNAPSHOT of the run so far, then live; 204 when none"},
		{"POST " + A2APath, "POST " + A2APath, "A2A JSON-RPC over SSE, 1.0 and 0.3: SendStreamingMessage / message/stream (a turn as a task), SubscribeToTask / tasks/resubscribe (the task first, then live; Last-Event-ID resumes exactly)"},
		{"GET " + a2a.CardPath, "GET " + a2a.CardPath, "the A2A agent card (1.0 supportedInterfaces and the 0.3 url)"},
		{sse.Pattern, sse.Pattern, "the SSE stream (?scope=, ?lastEventId=, ?replay=0, ?coalesce=, ?client=, ?presence=1, …: docs/protocol.md)"},
		{ws.Pattern, ws.Pattern, "the same stream over one WebSocket (close codes, the resume and cancel messages: docs/protocol.md)"},
		{sse.ManyPattern, "GET /events?session=a&session=b:descendants", "many sessions on one SSE stream, in id order under one cursor; the first frame names the connection (docs/protocol.md)"},
		{sse.ChangePattern, sse.ChangePattern, `add or remove sessions of that stream: {"add": [{"session", "scope"?, "from"?}], "remove": [ids]} → 200 {"connection", "sessions", "cursor"}`},
		{ws.ManyPattern, "GET /ws?session=a&session=b", `many sessions on one WebSocket; {"type":"subscribe"|"unsubscribe","session",…} change the set`},
		{durable.Pattern, "/v1/stream/{name}", "every session as a Durable Stream: PUT, POST, GET, HEAD, DELETE (docs/durable-streams.md)"},
	}
}

// handle mounts h on pattern and records the pattern (TestRoutesListEveryRoute
// checks that Routes lists each).
func (s *Server) handle(pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}
