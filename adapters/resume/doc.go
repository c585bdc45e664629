// Package resume is the resume protocol that the SSE (adapters/sse) and
// WebSocket (adapters/ws) transports both speak, in one place:
//
//   - the cursor and epoch grammar: [ParseCursor], [ParseEpoch],
//     [FormatID] ("42" or "<epoch>-42"), [MaxID], [MaxEpochLen];
//   - the subscribe request: [ParseRequest] reads the query parameters
//     (scope, maxQueued, replay, coalesce, throttle, events, lastEventId /
//     last_event_id) and the Last-Event-ID and [HeaderEpoch] headers into
//     eventbus.SubscribeOptions, refusing bad values with a 400
//     [*StatusError] that names them; [QueryRules] say what happens to
//     parameters the endpoint does not read;
//   - the answers: [StatusError] and its codes (Code…), [StatusFor] for the
//     bus's errors, [WriteError] and [StatusError.Answer] on the server's
//     side of the wire, [ReadStatusError] on the client's;
//   - the handlers' hooks, the types of their HandlerOptions' SessionID,
//     Authorize, Configure and OnSubscribe: [SessionIDFunc],
//     [AuthorizeFunc], [ConfigureFunc], [OnSubscribeFunc];
//   - the frames: the JSON envelope ([AppendEnvelope], [DecodeEnvelope])
//     and the [TypeStreamStart] frame of a live-only stream;
//   - the resuming client: [Stream] runs the connect/backoff loop — cursor,
//     epoch, which answers to retry, Retry-After, a restarted server's 404
//     — over a small [Transport] that each wire implements.
//
// docs/protocol.md is the wire reference. Everything here is safe for
// concurrent use, except a [Stream], which is read by one goroutine.
package resume
