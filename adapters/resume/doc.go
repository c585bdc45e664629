// Package resume is the resume protocol that the SSE (adapters/sse) and
// WebSocket (adapters/ws) transports both speak, in one place:
//
//   - the cursor and epoch grammar: [ParseCursor], [ParseEpoch],
//     [FormatID] ("42" or "<epoch>-42"), [MaxID], [MaxEpochLen];
//   - the subscribe request: [ParseRequest] reads the query parameters
//     (scope, maxQueued, replay, coalesce, throttle, events, types,
//     snapshot, client, presence, lastEventId / last_event_id) and the Last-Event-ID and [HeaderEpoch] headers into
//     eventbus.SubscribeOptions, refusing bad values with a 400
//     [*StatusError] that names them; [QueryRules] say what happens to
//     parameters the endpoint does not read;
//   - the answers: [StatusError] and its codes (Code…), [StatusFor] for the
//     bus's errors, [WriteError] and [StatusError.Answer] on the server's
//     side of the wire, [ReadStatusError] on the client's;
//   - the handlers' hooks, the types of their HandlerOptions' SessionID,
//     Authorize, Configure, OnSubscribe and AuthorizeCancel: [SessionIDFunc],
//     [AuthorizeFunc], [ConfigureFunc], [OnSubscribeFunc],
//     [AuthorizeCancelFunc];
//   - a client's cancel ([CancelRequest], [ParseCancel]), the one object
//     POST /session/{id}/cancel (adapters/turns) and the WebSocket cancel
//     message take;
//   - the frames: the JSON envelope ([AppendEnvelope], [DecodeEnvelope])
//     and the [TypeStreamStart] frame of a live-only stream;
//   - the resuming client: [Stream] runs the connect/backoff loop — cursor,
//     epoch, which answers to retry, Retry-After, a restarted server's 404
//     — over a small [Transport] that each wire implements; a stream
//     reads presence ([Stream.Presence]) and sends cancels ([Stream.Cancel]
//     over a transport that is a [Canceller]);
//   - many sessions on one connection: [ParseManyRequest] (the session=
//     set), [ConnCursor] (one cursor for the set: [ParseConnCursor],
//     [ConnCursor.Advance]), [ParseManyChange] and [ParseManyAdd] (an add or
//     a remove), and [Many], the connection both handlers drive: it
//     subscribes the set again, from the cursor, at every change.
//
// docs/protocol.md is the wire reference. Everything here is safe for
// concurrent use, except a [Stream], which is read by one goroutine.
package resume
