// Package ws serves a replaybus session over WebSocket and reads it back in
// Go, on github.com/coder/websocket: [Handler] is the endpoint
// GET /session/{id}/ws, mounted beside the SSE handler with the same query
// parameters, validation, Authorize hook and JSON error answers; [Client] /
// [Stream] is a resuming client with the SSE client's behaviour. Both sides
// stand on the resume package (adapters/resume): request parsing, the
// cursor grammar, the error answers, the envelope and the client loop are
// the same code as the SSE adapter's. The
// protocol follows OpenClaw's gateway (server-broadcast.ts): a slow socket
// is closed with 1008 "slow consumer" after a bounded grace, and targeted
// frames ([eventbus.Bus.SendTo]) reach one connection only.
// docs/protocol.md is the wire reference.
//
// Mounting:
//
//	h, err := ws.NewHandler(bus, ws.HandlerOptions{})
//	mux.Handle(ws.Pattern, h)        // "GET /session/{id}/ws"
//	srv.RegisterOnShutdown(func() { h.Close() })
//
// Many sessions on one socket: mounted at [ManyPattern] ("GET /ws"), the
// handler serves ?session=a&session=b…; the messages
// {"type":"subscribe","session":…} and {"type":"unsubscribe","session":…}
// change the set, and every event carries "cursor", the connection cursor
// to resume with (docs/protocol.md, "Many sessions on one connection").
//
// # Before the upgrade
//
// The query parameters are the SSE endpoint's, validated by the same code
// (resume.ParseRequest, with HandlerOptions.Query): scope, replay (0/1; a
// cursor wins over 0),
// maxQueued (16–2048), client and presence (presence frames),
// lastEventId / last_event_id ("<seq>" or
// "<epoch>-<seq>"), events (typed/message, accepted for parity), and the
// Last-Event-ID and X-Event-Epoch headers for clients that can send them; a
// look-alike of a known parameter (?lastEventID=) is a 400
// unknown_query_parameter. Every error is answered before anything is
// subscribed, as JSON {"code":…,"message":…}: 400 (the value named), 426
// upgrade_required for a request that is not a WebSocket handshake (or
// comes over HTTP/2), 400 unsupported_websocket_version (with
// Sec-WebSocket-Version: 13) and invalid_handshake (a bad
// Sec-WebSocket-Key), 403 forbidden_origin for a page from a foreign origin
// (HandlerOptions.Accept.OriginPatterns allows one), 403 from Authorize, 404
// session_not_found, 405, 410 session_closed, 429
// subscriber_limit_exceeded with Retry-After, 503 when closed. The
// handshake is checked by coder/websocket's rules before Authorize and
// Subscribe, so a foreign page never holds a subscriber. The handshake
// answer carries the bus epoch in X-Event-Epoch.
//
// # Frames
//
// One JSON text message per frame, the SSE envelope:
//
//	{"v":1,"id":42,"epoch":"9f2c…","type":"tool_call","session":"s1","data":{…},"replay":true,"origin":"tab-7"}
//
// "id" and "epoch" only on real events (synthetic and targeted frames have
// neither and never move a cursor; HandlerOptions.PlainIDs leaves "epoch"
// out), "data" when there is a payload,
// "replay" only when true, "origin" only when set; a byte payload has
// "data" in base64 with "contentType" and "encoding":"base64" (still a text
// message: docs/protocol.md). The synthetic frames are
// the SSE ones (state_resync_required, replay_complete,
// slow_client_warning, client_evicted, presence) plus "pong", the answer to
// a ping message, [TypeCancelResult], the answer to a cancel message, and
// "stream_start" (resume.TypeStreamStart), the first frame of
// a live-only stream, naming where it starts. A frame without id whose type
// is none of these is a targeted frame.
//
// The frames that are ready together go out as one batch (up to 64
// messages or 64 KiB, one write, one write deadline), each real event's
// message's envelope encoded once per handler and shared by every
// connection. coder/websocket frames every message (and compresses it on a
// connection that negotiated permessage-deflate through
// HandlerOptions.Accept): the handler hands it the shared envelope bytes
// (Conn.Write copies them) and collects the frames of a batch beneath the
// library, so that the batch is one write.
//
// # Batched messages
//
// A client that offers the subprotocol [SubprotocolBatch]
// ("replaybus.batch.v1", Sec-WebSocket-Protocol) and has it selected gets
// each batch as one message instead: a JSON array of its envelopes,
// [{…},{…}], in order, joined from the same shared encodings, one
// Conn.Write per batch; a batch of one is still an array. stream_start,
// pong and cancel_result are arrays of one, sent alone; targeted frames, client_evicted and
// the other synthetic frames are elements of the batch they fall in
// (client_evicted is the last element before the 1008 close). The client
// messages are unchanged. [SplitBatch] splits such a message; [Client]
// offers the subprotocol and reads either form.
//
// # Resume
//
// The cursor comes from the URL or headers as on SSE, or — for browsers,
// which cannot set headers and should not repeat a stale URL — from a first
// client message {"resume": {"lastEventId": "41", "epoch": "9f2c…"}} sent
// within ResumeWait (1 s) of the upgrade; {"resume": {}} starts at once
// without a cursor. Without either, the stream starts as the URL says when
// the wait ends. Replay, replay_complete and the state_resync_required
// frames (epoch_reset, ring_evicted, replay_budget_exceeded) are the SSE
// ones.
//
// # Client messages
//
// Exactly three are accepted ([ParseClientMessage]): resume (first message
// only, and only without a cursor in the URL), {"ping": <value>},
// answered by {"v":1,"type":"pong","session":…,"data":<value>}, and
// {"type":"cancel","turn"?,"cascade"?}, a cancel of the session's turns as
// POST /session/{id}/cancel takes it (adapters/turns), answered on this
// connection by a cancel_result frame with the route's status and answer
// ([CancelResultData]; an error answer keeps the connection open; the
// AuthorizeCancel hook gets the upgrade request). Anything else closes the
// connection with 1008 and a reason naming the problem; a binary message
// closes with 1003; a message over ReadLimit (4 KiB) with 1009.
//
// # Close codes
//
//	1000  the session was closed, after its live session_closed event
//	1001  the handler (Close/Shutdown) or the bus is shutting down
//	1003  a binary client message
//	1008  "slow consumer" after client_evicted; or an invalid client message (reason names it)
//	1009  a client message over ReadLimit
//	1011  a resume the bus refused unexpectedly
//	1013  a resume message found the session at its subscriber cap ("subscriber_limit_exceeded"),
//	      or the bus's backend failed (eventbus.ErrBackend, "unavailable")
//
// # Backpressure and liveness
//
// The subscriber's overflow policy is the bus's (drop_subscriber by
// default), as on SSE. Under drop_subscriber an overflow evicts the
// subscriber: from that moment the handler has CloseGrace (1 s) to write
// client_evicted — skipping what was still queued, which the client gets
// back from the replay buffer when it resumes — and close with 1008 "slow
// consumer"; then the socket is cut whether or not the peer read it. Every
// write has a deadline (WriteTimeout, 10 s; a write that misses it ends the
// connection) and nothing bounds reads, so an idle but healthy socket is
// never cut; WebSocket pings every PingInterval (15 s) must be answered
// within WriteTimeout. The handler starts two goroutines per connection
// (reader; pinger and eviction watch), both gone when it ends.
package ws
