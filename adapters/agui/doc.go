// Package agui writes a turn as AG-UI events (the Agent-User Interaction
// protocol, as npm @ag-ui/client 1.0.0 validates them) over SSE:
// RUN_STARTED, TEXT_MESSAGE_START / _CONTENT / _END, REASONING_START /
// REASONING_MESSAGE_START / _CONTENT / _END / REASONING_END,
// TOOL_CALL_START / _ARGS / _END / _RESULT, ACTIVITY_SNAPSHOT (the plan),
// CUSTOM (any other event), MESSAGES_SNAPSHOT, and RUN_FINISHED or
// RUN_ERROR — each frame one JSON event with an id: line.
//
// An [Encoder] turns the parts of package codec into events, keeping the
// order the client's verifier requires (a message or tool call started
// before its content and ended before the run finishes, one run at a
// time), and keeps the messages it wrote for a MESSAGES_SNAPSHOT.
//
// # Ids
//
// Every frame carries an id naming how much of the session log it holds:
// the frames that the parts of event N produce are "<epoch>-<N>:0",
// "<epoch>-<N>:1", … and the last of them "<epoch>-<N>", the cursor of
// the other routes. A resume after "<epoch>-<N>:k" replays event N
// without its first k+1 frames ([Encoder.Skip]); after "<epoch>-<N>", from
// event N+1. Ids derived from events (message and tool-call ids) use a
// block's first event id, so a stream encoded from the compacted log
// names everything as the live stream did.
//
// # Join and resume
//
// AG-UI has no resume of its own. Each connection is a new run to the
// client, so a stream that does not start at the turn's beginning starts
// with [Encoder.Reattach]: RUN_STARTED, optionally MESSAGES_SNAPSHOT of
// the run so far (a join without cursor: snapshot then tail), and the
// start events of whatever message or tool call is still open, which the
// client applies to the messages it has (its reducer treats a start of a
// known id as a continuation). Prime the encoder with the events before
// the stream's start, [Encoder.Skip](-1) set, first.
//
// # Routes
//
// [Handler] serves AG-UI from the bus's turns: POST {path} with a
// RunAgentInput hands its user message to the application's [StartFunc]
// and streams the turn it starts (run id: the turn id); with a
// Last-Event-ID it continues that run exactly after the id; GET
// {path}/{threadId}/stream resumes the same way or, without a cursor,
// joins the active run (snapshot then tail). A cancelled run ends with
// RUN_ERROR code [CodeCancelled].
//
// docs/frontends.md has the mapping table. An Encoder is for one stream
// and one goroutine.
package agui
