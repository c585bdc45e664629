// Package turns serves the turn routes of a replaybus session over HTTP,
// beside the stream handlers of adapters/sse and adapters/ws: the stop
// button (POST /session/{id}/cancel, [eventbus.Bus.Cancel]), "is a turn
// active?" (GET /session/{id}/turn, [eventbus.Bus.Turn]) and who is
// attached (GET /session/{id}/presence, [eventbus.Bus.Presence]).
// docs/protocol.md, "Turn routes", is the wire reference.
//
// Mounting:
//
//	th, err := turns.NewHandler(bus, turns.HandlerOptions{})
//	mux.Handle(turns.CancelPattern, th.Cancel())     // "POST /session/{id}/cancel"
//	mux.Handle(turns.TurnPattern, th.Turn())         // "GET /session/{id}/turn"
//	mux.Handle(turns.PresencePattern, th.Presence()) // "GET /session/{id}/presence"
//
// Under another router, mount the three handlers on its routes and set
// [HandlerOptions.SessionID]; each checks its method itself (405 with
// Allow).
//
// # Answers
//
// Every error is the stream handlers' JSON {"code", "message"} with the
// codes of adapters/resume (one cause, one code on every route), and
// every answer carries X-Event-Epoch. A refused cancel — a malformed body
// or turn id (400), the AuthorizeCancel hook (403), a page of another
// origin (403 forbidden_origin), an unknown or closed session (404, 410),
// a turn that has ended (409 turn_ended) — writes nothing to the log; an
// accepted one writes one turn_cancel record, and the turns it names end
// with turn_end{cancelled} on every stream of the session.
//
// The WebSocket handler takes the same cancel as a client message
// ({"type":"cancel", "turn"?, "cascade"?}) and answers it on the socket;
// the stream handlers take ?client= and ?presence=1 for presence.
package turns
