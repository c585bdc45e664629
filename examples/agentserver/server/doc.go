// Package server is the HTTP side of the agentserver example: a small
// agent-server API over a replaybus [eventbus.Bus], the SSE endpoint of
// [sse.Handler], and an embedded browser page that watches a session live.
//
// # Routes
//
//	GET    /                        the page (HTML, JS and CSS embedded, no build step)
//	GET    /static/{file}           the page's assets
//	GET    /healthz                 200 {"status":"ok"}
//	GET    /info                    epoch, last id, page defaults, event types, bus and SSE counters
//	GET    /sessions                every live session (eventbus.SessionInfo), sorted by id
//	POST   /sessions                {"id"?, "parent"?} → 201 {"id"}; an id is generated when absent;
//	                                a closed id is reopened (ACP session/resume), a root given a parent
//	POST   /session/{id}/events     {"type", "data"?, "origin"?} → 202 {"id"} (the event id);
//	                                404 for a session nobody created (a typo creates nothing)
//	DELETE /session/{id}            close the session (?cascade=1: and its descendants) → 204, also when
//	                                already closed; its children move up to its parent; 404 when unknown
//	GET    /session/{id}/events     the SSE stream ([sse.Handler]; ?scope=, ?lastEventId=, …)
//
// Every error is JSON {"code": …, "message": …} with a 4xx or 5xx status;
// the SSE endpoint's codes are the sse package's, the others are listed with
// [Server.ServeHTTP].
package server
