// Command agentserver is an agent-pool style server on a replaybus event
// bus: sessions that agents publish to, a Server-Sent Events endpoint that
// clients subscribe to and resume with Last-Event-ID, and a live page that
// shows it all in a browser.
//
// # Running
//
//	go run ./examples/agentserver -demo
//
// then open http://localhost:8080/. With -demo a simulated orchestrator agent
// and two sub-agents (child sessions) stream Agent Client Protocol shaped
// traffic — agent_message_chunk and agent_thought_chunk text deltas at token
// rate, tool_call and tool_call_update, plan, turn_start and turn_end — and
// the page opens session "demo" with scope descendants.
//
// With -demo the server also keeps the demo tree's transcript (the text of
// every open session's agent_message_chunk events, bounded: closed and
// expired sessions leave it, at most 256 sessions and 64 KiB of text each)
// and gives it to the bus as its snapshot provider: a page whose position
// was lost gets a snapshot frame with the transcript of the sessions its
// scope covers and then exactly the events after it, and
// http://localhost:8080/?snapshot=1 starts from the transcript. The server
// compacts ACP replies in the replay buffer by default (a program default
// of config.LoadWithDefaults; AGENTPOOL_EVENTBUS_REPLAY_COMPACT=off turns
// it off): a page that opens late receives each reply as one record.
//
// It serves HTTP/1.1 and HTTP/2 without TLS (h2c with prior knowledge,
// curl --http2-prior-knowledge); the WebSocket route needs HTTP/1.1.
//
// Flags:
//
//	-addr        listen address; default 127.0.0.1:8080 (loopback only: the
//	             server has no authentication; -addr :8080 for every interface),
//	             or :$PORT when PORT is set. On a loopback address a request
//	             whose Host is not localhost or a loopback IP gets 421 (DNS
//	             rebinding)
//	-demo        run the simulated agents
//	-demo-rate   text deltas per second per agent (default 30; above 0, at most 100000)
//	-log-level   debug, info, warn or error (default info)
//	-epoch-ids   write SSE ids as <epoch>-<seq> (default true)
//	-nats        run the bus over NATS JetStream: "embedded" starts an
//	             in-process nats-server with JetStream, nats://… uses an
//	             external server or cluster; empty (default) is the
//	             in-memory bus (see docs/distributed.md)
//	-nats-dir    JetStream data folder for -nats embedded
//	             (default $TMPDIR/replaybus-nats)
//	-nats-listen client address of the -nats embedded server (default
//	             127.0.0.1:4222: loopback, so a second node joins with
//	             -nats nats://127.0.0.1:4222; port 0 picks a free one)
//	-nats-replicas  servers that hold every event, 1–5 (default 1, or
//	             AGENTPOOL_EVENTBUS_NATS_REPLICAS); 3 on a 3-server cluster
//	             survives the loss of one
//	-nats-storage   file or memory (default file, or AGENTPOOL_EVENTBUS_NATS_STORAGE)
//	-nats-sync   when the -nats embedded server syncs JetStream to disk:
//	             always, or an interval such as 1s (default nats-server's 2m,
//	             or AGENTPOOL_EVENTBUS_NATS_SYNC); what an acknowledgement
//	             then means: docs/distributed.md
//	-nats-cluster, -nats-routes  the -nats embedded server's route address
//	             and the other servers' nats-route:// URLs: three such nodes
//	             form one NATS cluster (docs/distributed.md, "Three nodes")
//
// A flag given wins over its AGENTPOOL_EVENTBUS_NATS_* variable.
//
// Over NATS the node reconnects by itself for as long as it runs; while it
// is cut off, /healthz and the routes that use the bus answer 503 with
// Retry-After (docs/distributed.md, "A node that heals").
//
// The bus is configured by the AGENTPOOL_EVENTBUS_* environment variables
// (see package config); a bad or unknown variable stops the program at
// start with every problem listed, exit status 2.
//
// # API
//
//	POST   /sessions               {"id"?, "parent"?} → 201 {"id"} (absent id: generated; "" is refused)
//	POST   /session/{id}/events    {"type", "data"?, "origin"?} → 202 {"id", "epoch", "cursor"}
//	DELETE /session/{id}           → 204 (?cascade=1 closes the descendants too)
//	GET    /session/{id}/events    SSE: ?scope=session|descendants|subtree|all, ?lastEventId=, ?maxQueued=, ?replay=0, ?events=message
//	GET    /session/{id}/ws        WebSocket: the same parameters; {"resume":{"lastEventId","epoch"}} as first message; a targeted "hello" frame per connection
//	GET    /sessions               [{"id","parent","subscribers","buffered","lastEventId"}]
//	GET    /info                   epoch, last id, event types, counters (bus, sse, ws, durable)
//	GET    /healthz                {"status":"ok"}; 503 {"status":"unavailable","message"} while the NATS connection is down
//	PUT, POST, GET, HEAD, DELETE /v1/stream/{name}
//	                               the session {name} as a Durable Stream (adapters/durable; the
//	                               server's root is a Durable Streams base URL): docs/durable-streams.md
//
// Errors are JSON {"code", "message"}; see package server for the list.
// -h lists every route (server.Routes) and flag.
//
// With curl:
//
//	curl -N 'localhost:8080/session/demo/events?scope=descendants'
//	curl -N -H 'Last-Event-ID: 120' localhost:8080/session/demo/events
//	curl -H 'Content-Type: application/json' -d '{"type":"note","data":{"text":"hi"}}' localhost:8080/session/demo/events
//
// # Shutdown
//
// SIGINT or SIGTERM stops the demo, closes the SSE handler (every open stream
// ends after its last complete frame, so clients resume cleanly elsewhere)
// and the WebSocket handler (every socket gets 1001 "going away"), waits up
// to 10 s for other requests with http.Server.Shutdown and for the
// WebSockets' close handshakes, then closes the bus. Stop a server started
// in the background by its own pid: `go run … &` then `kill $!` signals only
// the go command, and the server it started keeps running.
//
// # The page
//
// The stats over the event log count events (a merged row of ?coalesce=acp
// counts every event it holds, so "replayed events" agrees with
// replay_complete's replayedCount; "events" then adds "in N rows"), and
// "control frames" the frames without an id (hello, replay_complete,
// state_resync_required, slow_client_warning, client_evicted); each says
// so on hover. "Received ids" are one per row with an id: a merged row is
// one id for all its events, so they can be fewer than the events. The
// Sessions list shows open sessions only: a sub-agent leaves it when its
// session_closed arrives, even if a list fetched earlier still holds it.
// The Agents panel rebuilds each agent from the stream; closed agents are
// folded under one "N closed agents" line below the live ones (the newest
// 20). After a server restart the page follows docs/protocol.md's "After a
// restart": it drops what it showed at state_resync_required{epoch_reset},
// shows the new history (from a snapshot when the server's buffer lost its
// start), and retries a 404 from the new epoch for 30 s until the session
// is back. The page closes its stream on pagehide (navigation, reload, a
// closed tab), so the server frees the subscription at once.
package main
