// Package sse serves a replaybus session to browsers over Server-Sent
// Events and reads it back in Go: [Handler] is the endpoint
// GET /session/{id}/events (after qwen-code's SSE route), the
// encoder ([AppendEvent], [WriteEvent], [Encoder]) writes the frames, and
// [Client] / [Stream] is a resuming client (the seed SDK's parseSseStream
// plus its reconnect loop: the resume package's client loop over an SSE
// transport built on [Decoder], a WHATWG-conformant parser). The request
// parsing, the cursor grammar, the error answers and the envelope are the
// resume package's, shared with adapters/ws.
// docs/protocol.md is the wire reference for client authors.
//
// Mounting:
//
//	h, err := sse.NewHandler(bus, sse.HandlerOptions{})
//	mux.Handle(sse.Pattern, h)        // "GET /session/{id}/events"
//	srv.RegisterOnShutdown(func() { h.Close() })
//
// Under another router, set [HandlerOptions.SessionID].
//
// Many sessions on one stream: the same handler mounted without a session
// in its path serves GET /events?session=a&session=b:descendants (their
// events in id order, each id: line the connection cursor that resumes the
// whole set) and POST /events/{conn}, which adds sessions to and removes
// them from an open stream (docs/protocol.md, "Many sessions on one
// connection"):
//
//	mux.Handle(sse.ManyPattern, h)   // "GET /events"
//	mux.Handle(sse.ChangePattern, h) // "POST /events/{conn}"
//
// # Wire format
//
// A stream starts with "retry: 3000" and a blank line; a live-only one
// (?replay=0 without a cursor) then sends a resume.TypeStreamStart frame whose
// id: line says where it starts; then comes one frame per event. Frames that are ready together are written as one batch (at most 64
// frames or 64 KiB) and flushed once; each real event is encoded once and the
// bytes shared by every stream of the handler:
//
//	id: 9f3c-42                    real events, and a snapshot frame (its lastEventId); other synthetic frames have none
//	event: tool_call
//	data: {"v":1,"id":42,"type":"tool_call","session":"s1","data":{…},"replay":true,"origin":"tab-7"}
//
// The data line is one JSON envelope: "v" (always 1), "id" (absent on
// synthetic frames), "type", "session", "data" (the payload as published;
// absent when there is none), "replay" (only when true: the event comes from
// the replay buffer), "origin" (only when set), and on a merged event of a
// coalescing stream "count" and "firstId". A byte payload (published with
// eventbus.Bus.PublishBytes) has "data" in base64 with "contentType" and
// "encoding":"base64" beside it (docs/protocol.md). Should a JSON payload hold raw
// line breaks, the envelope is split over several data: lines, which every
// SSE parser joins back. The event: line never carries CR, LF or NUL, and the
// id: line is "<epoch>-<digits>" (digits alone with [HandlerOptions.PlainIDs]).
// During silence a ": heartbeat" comment is written every 15 s.
//
// Synthetic frames (no id; they never move a client's Last-Event-ID) are
// state_resync_required, replay_complete, slow_client_warning,
// client_evicted and, with ?presence=1, presence (the clients attached —
// ?client= names this stream's — and the agent status, first, then on
// every change); session_closed and the turn records (turn_start,
// turn_cancel, turn_end) are real events. Package eventbus/frame
// has their payloads (frame.ResyncData, …).
//
// # Resume
//
// The cursor is the id of the last event the client received, from the
// Last-Event-ID header (what EventSource sends on reconnect) or the
// last_event_id / lastEventId query parameter; the header wins. It is
// strict: decimal digits up to 2^53−1, or "<epoch>-<digits>"
// (resume.ParseCursor);
// empty means no cursor. With a cursor the stream replays every event in
// scope with a greater id, then sends replay_complete, even under ?replay=0
// (a resume always replays); without one it replays the whole buffer
// (unless ?replay=0) and sends replay_complete only when the replay byte
// budget cut the replay short or older history is gone (historyLost).
// A cursor from another bus incarnation — its epoch, from an epoch-qualified
// id or the X-Event-Epoch request header, differs from the bus's — or past
// the newest id gets state_resync_required{reason:"epoch_reset"} first, then
// the whole buffer (or, with a snapshot provider and a buffer that no
// longer holds the whole new history, a snapshot and the events after it):
// docs/protocol.md, "After a restart"; a cursor older than the buffer gets
// state_resync_required{reason:"ring_evicted"}. Either way the stream goes
// on: a resync is a frame, not an error.
//
// The response ends after client_evicted (the client resumes from its last
// id and gets the rest from the buffer), after the live session_closed of
// the subscribed session (descendant sessions' session_closed events pass
// through, and so does a replayed one of a session since reopened), when the bus or the handler is closed, and when a write fails
// or exceeds the write timeout (10 s).
//
// # Coalescing
//
// ?coalesce=acp (or agentpool) merges the consecutive mergeable events
// queued for the stream into one frame (the coalesce package's rule sets,
// AgentPool's drain_and_merge); ?throttle=150ms (0–5s, with coalesce) also
// holds a delta for that long after the previous one was sent (OpenClaw).
// A merged frame's id is the last merged event's, so Last-Event-ID resumes
// exactly after what it holds; "count" and "firstId" say what that is.
//
// # Status codes
//
// Every error is answered before the stream starts, with no subscriber
// registered, as JSON {"code":…,"message":…} whose message names the bad
// value:
//
//	400 invalid_last_event_id (also: the header twice),
//	    invalid_query (does not parse, or a parameter twice),
//	    unknown_query_parameter (a look-alike of a known parameter,
//	    ?lastEventID=; with HandlerOptions.Query.Strict any unknown one),
//	    invalid_max_queued (not 16–2048), invalid_scope,
//	    invalid_replay (not 0/1), invalid_events (not typed/message),
//	    invalid_coalesce (not acp/agentpool/off),
//	    invalid_throttle (not a duration 0–5s, or without coalesce),
//	    invalid_types (an entry with white space or a control character),
//	    invalid_snapshot (not 0/1), invalid_client (not a client id),
//	    invalid_presence (not 0/1),
//	    invalid_epoch (malformed, or twice; a well-formed foreign
//	    epoch is an epoch_reset frame, not an error),
//	    invalid_session_id, invalid_argument
//	403 forbidden                  from HandlerOptions.Authorize
//	404 session_not_found
//	405 method_not_allowed
//	410 session_closed
//	429 subscriber_limit_exceeded  with Retry-After: 5
//	500 internal_error
//	503 unavailable                the bus's backend failed (eventbus.ErrBackend), with Retry-After: 1
//
// Messages carry no Go package prefix. A closed handler, or one over a
// closed bus, answers no 503 (a browser's EventSource gives up for good on
// any non-200 answer): it answers 200 with only a retry: line, spread over
// [retry, 2×retry], and ends, so every client reconnects later.
//
// A 200 answer is text/event-stream with Cache-Control: no-cache,
// no-transform, X-Accel-Buffering: no, the bus epoch in X-Event-Epoch, and
// no Content-Length. [Stream] retries 5xx, 408, 429 and a restarted
// server's 404, and stops on any other 4xx; docs/protocol.md lists which
// answers any client should retry.
//
// # Concurrency
//
// Each stream is served by the request's goroutine alone: it writes the
// retry line, frames and heartbeats (one writer) and sets a write deadline
// before each write, so a peer that stopped reading cannot pin it, and
// clears it after the write, so a quiet stream is never cut (an HTTP/2
// stream whose deadline passes is reset even when nothing is written). The
// handler starts no goroutine of its own, unless [HandlerOptions].Hijack:
// then each HTTP/1.x stream, once subscribed, takes its connection over and
// is served by a goroutine of the handler, with a second one that reads the
// connection to notice the client going (net/http's request goroutine and
// buffers are released: an idle stream costs 14 KiB instead of 28 KiB). A
// client that disconnects is unsubscribed at once and frees its slot under
// the subscriber cap, either way. [Handler.Close] ends every stream;
// [Handler.Shutdown] also waits for them. [Encoder], [Decoder] and [Stream]
// are for one goroutine each; [AppendEvent], [WriteEvent],
// [Handler] and [Client] are safe for concurrent use.
package sse
