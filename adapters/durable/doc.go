// Package durable serves replaybus sessions as Durable Streams: the open,
// HTTP-native resume protocol of durable-streams/durable-streams
// (PROTOCOL.md), so that its clients (npm @durable-streams/client and the
// libraries built on it) read and write an agent session with no adapter
// of their own, and its conformance suite judges ours.
//
// Mounting:
//
//	h, err := durable.NewHandler(bus, durable.HandlerOptions{})
//	mux.Handle(durable.Pattern, h) // "/v1/stream/": a stream per session, /v1/stream/{name}
//
// The example server (examples/agentserver) mounts it there, so its root
// is a Durable Streams base URL.
//
// # What maps to what
//
//   - A stream is the bus session whose id is the path below
//     [HandlerOptions.Prefix]. PUT creates the session (or serves one that
//     exists, with its history); a session created by another route is
//     readable as an application/json stream without a PUT.
//
//   - An append is one bus event per item: each JSON message of an
//     application/json stream (a top-level array is flattened one level),
//     or the whole body of any other content type, published as bytes of
//     the stream's media type (eventbus.Bus.PublishBytes; of
//     application/octet-stream when the bus refuses that type, or when it
//     is new and the handler has had 1,024 media types interned, so that
//     clients cannot use up the process's 4,096) and read back as the same
//     bytes. Events of other types, published into the session by
//     Go or by the SSE route, read as the envelope the SSE and WebSocket
//     routes send (resume.AppendEnvelope: {"v":1,"id","type","session",
//     "data","origin"}, a byte payload's data in base64 with "contentType"
//     and "encoding").
//
//   - An offset is the position after an event: [FormatOffset] writes
//     "<bus epoch>_<event id, 16 digits>", the SSE route's
//     "<epoch>-<id>" in another spelling ([ParseOffset] reads it back), so a
//     client can switch routes and resume. An offset of another epoch (the
//     bus restarted: code epoch_reset, naming the offset and the bus's
//     epoch) or one whose following events the replay buffer evicted
//     (ring_evicted) is 410 Gone: never a silent gap. The bus decides
//     (eventbus.SubscribeOptions.StrictCursor). "-1", and an offset whose
//     id is 0 in any epoch, read from the beginning of what the stream
//     holds; "now" is the session's newest id, asked of the bus.
//
//   - Closing a stream closes its session: live readers on every route see
//     the end (an SSE client its session_closed). The handler keeps a closed
//     stream's content (the bus frees a closed root session's buffer), so it
//     stays readable until deleted. A session closed by another route is the
//     stream's EOF at the offset the handler last knew; one the handler
//     never served is 410 session_closed, as on every route (an append to
//     it 409, PROTOCOL.md §5.2).
//
//   - DELETE closes the session and forgets the stream; while forks read
//     it, it is soft-deleted (410) and kept.
//
//   - A fork is a new session plus a link to its source up to the fork
//     offset: reads stitch the two, long-polls wait for the fork's own
//     appends only. A byte sub-offset inside an append copies that part of
//     it into the fork's session.
//
//   - Subscriptions (PROTOCOL.md §6–7: signed webhooks, pull-wake leases)
//     are served below <Prefix>__ds/ when [HandlerOptions.Subscriptions] is
//     set; [Handler.Shutdown] stops their deliveries.
//
// docs/durable-streams.md lists every part of PROTOCOL.md with its status
// and each deviation with its reason.
//
// # Shutdown
//
// [Handler.Close], [Handler.Shutdown] and [Handler.Stats] keep the SSE and
// WebSocket handlers' contract: Close refuses new requests (503
// unavailable with Retry-After, which Durable Streams clients retry) and
// ends every open long-poll and SSE answer at once, without waiting;
// Shutdown does the same and waits until every request has returned (an
// append in progress finishes); Stats counts requests, appends and reads.
//
// # Concurrency
//
// A [Handler] is safe for concurrent use. Appends, closes and producer
// checks on one stream are serialised by the stream's lock; reads take no
// lock of the handler and subscribe to the bus like any other reader
// (each read is one short-lived subscription, so they count against
// eventbus.Options.MaxSubscribers while they last).
package durable
