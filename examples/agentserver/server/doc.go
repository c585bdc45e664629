// Package server is the HTTP side of the agentserver example: a small
// agent-server API over a replaybus [eventbus.Bus], the SSE endpoint of
// [sse.Handler], and an embedded browser page that watches a session live.
//
// # Routes
//
//	GET    /                        the page (HTML, JS and CSS embedded, no build step)
//	GET    /static/{file}           the page's assets
//	GET    /replaybus.js            the browser client module ([browser.Handler]: ETag, gzip; docs/browser.md)
//	GET    /healthz                 200 {"status":"ok"}; 503 {"status":"unavailable","message"} while
//	                                the bus's backend is down (Options.Ready: a node over NATS cut off)
//	GET    /info                    epoch, last id, page defaults, event types, the counters of the bus
//	                                and of the SSE, WebSocket, Durable Streams and turn routes
//	GET    /sessions                every live session (observe.SessionInfo), sorted by id
//	POST   /sessions                {"id"?, "parent"?} → 201 {"id"}; an id is generated when absent
//	                                (an explicit "" is 400); a closed id is reopened (ACP session/resume)
//	POST   /session/{id}/events     {"type", "data"?, "origin"?} → 202 {"id", "epoch", "cursor"}: the event
//	                                id, the bus epoch, and the id as the SSE stream writes it (for Last-Event-ID);
//	                                404 for a session nobody created (a typo creates nothing)
//	DELETE /session/{id}            close the session (?cascade=1: and its descendants) → 204, also when
//	                                already closed; its children move up to its parent; 404 when unknown
//	POST   /session/{id}/messages   {"text", "turn"?} → 202 {"turn", "startId", "cursor", "epoch"}: a turn of the
//	                                simulated model (examples/agentserver/agent: deterministic for the text;
//	                                "stream N" streams N deltas), paced by Options.AgentRate; 409 turn_active
//	                                while the session's turn runs
//	POST   /session/{id}/cancel     the stop button ([turns.Handler]): {"turn"?, "cascade"?} → 202 {"cancelled",
//	                                "held"}; 409 turn_ended; nothing is written on a 4xx
//	GET    /session/{id}/turn       200 {"turn", "session", "status", "startId", "cursor", "epoch"} while a turn
//	                                is active (cursor: resume there to read it from its start); 204 when none
//	GET    /session/{id}/presence   200 {"session", "clients", "status", "turn"?}
//	PUT    /session/{id}/status     {"status"} → 204: the agent status (idle, thinking, streaming, …; 1–64 bytes
//	                                of [A-Za-z0-9_.:-]) of a producer that publishes over HTTP
//	POST   /api/chat                the AI SDK chat route ([aisdk.Handler]): DefaultChatTransport's body {id,
//	                                messages, trigger, …} starts a turn of the model on session {id} (created
//	                                when new) → the turn as a UI-message stream; 409 turn_active
//	GET    /api/chat/{id}/stream    the AI SDK resume: the active turn from its start, compacted, then live; 204
//	                                when none
//	POST   /api/chat/{id}/stop      cancel the chat's turn → 202 {"cancelled", "held"}; the stream ends with abort
//	POST   /agui                    AG-UI ([agui.Handler]): a RunAgentInput starts a turn (run id: the turn id) → the
//	                                run as AG-UI events, each frame with an id:; with Last-Event-ID, the run resumed
//	GET    /agui/{id}/stream        AG-UI resume (Last-Event-ID) or join (RUN_STARTED, MESSAGES_SNAPSHOT, live); 204
//	POST   /a2a                     A2A JSON-RPC over SSE ([a2a.Handler]), 1.0 and 0.3: a message starts a turn (task id
//	                                "<turn>@<contextId>"); resubscribe: the task first, then live; Last-Event-ID
//	GET    /.well-known/agent-card.json  the A2A agent card
//	GET    /session/{id}/events     the SSE stream ([sse.Handler]; ?scope=, ?lastEventId=, ?client=, ?presence=1, …)
//	GET    /session/{id}/ws         the same stream over WebSocket ([ws.Handler]: same parameters, resume and cancel
//	                                messages, close codes)
//	GET    /events                  many sessions on one SSE stream (?session=a&session=b:descendants):
//	                                the sessions' events in id order under one cursor; the first frame
//	                                names the connection (docs/protocol.md, "Many sessions on one connection")
//	POST   /events/{conn}           {"add": [{"session", "scope"?, "from"?}], "remove": [ids]} → 200
//	                                {"connection", "sessions", "cursor"}: changes that stream's set
//	GET    /ws                      many sessions on one WebSocket; subscribe/unsubscribe messages
//	*      /v1/stream/{name}        the session as a Durable Stream ([durable.Handler])
//
// [Routes] lists them (the agentserver command's -h prints it).
//
// POST bodies must be Content-Type: application/json (else 415, so that a
// web page cannot post to a local agent server cross-site without a CORS
// preflight), uncompressed (a Content-Encoding other than identity is 415
// unsupported_content_encoding naming it, with Accept-Encoding: identity;
// decoding gzip would need a second bound on what it inflates to, for no
// gain on bodies this small), at most MaxBodyBytes, and arrive within Options.BodyTimeout
// of the request's headers (else 408 and the connection is closed). A
// request refused before its body is read (415, 400, 404, 405, …) is
// answered at once with Connection: close, and its connection is closed
// within BodyTimeout whether or not the body ever arrives; a request whose
// body was read to its end, by any route (the Durable Streams appends too),
// keeps its connection alive. Streams (requests without a body) are not
// affected by that bound. Every answer must be taken by the client within
// Options.WriteTimeout (10 s), or the connection is closed: a client that
// pipelines requests and never reads cannot pin a connection and its
// goroutine (the streams bound each of their writes themselves). A body is one JSON object whose member names are exact and unique:
// an unknown member, one in another case ("TYPE") or one given twice is 400
// invalid_json (encoding/json alone would fold the case and keep the last
// value), and so is a lone UTF-16 surrogate escape ("\ud800") in a member
// (encoding/json would read it as U+FFFD). Session ids are validated the same way on every route, the
// frontend routes' chat id, threadId and contextId included: what the bus accepts, and one URL path
// segment (no "/", ".", "..").
//
// The POST routes take no query parameters and DELETE only cascade; any
// other is 400 invalid_argument naming it (?cascde=1 must not quietly close
// only the session). The stream routes ignore parameters they do not read,
// unless one looks like a misspelling of theirs (see resume.QueryRules).
//
// Every error is JSON {"code": …, "message": …} with a 4xx or 5xx status;
// the SSE endpoint's codes are the sse package's, the others are listed with
// [Server.ServeHTTP].
package server
