// Package frame defines the frames of the delivery protocol of package
// eventbus as they travel: the types of the bus's own frames, the reasons
// they carry and their JSON payloads. A client (in process, or behind
// adapters/sse or adapters/ws) decodes a frame's eventbus.Event.Data into
// the payload its Type names: state_resync_required into [ResyncData],
// replay_complete into [ReplayCompleteData], slow_client_warning into
// [SlowClientWarningData], client_evicted into [ClientEvictedData],
// session_closed into [SessionClosedData], snapshot into [SnapshotData],
// turn_start, turn_end and turn_cancel into [TurnData],
// presence into [PresenceData].
// docs/protocol.md has the wire. [CheckName] and [CheckTypes] say which
// session ids, event types and type filters a bus accepts, so that an
// adapter can refuse a bad one before it reaches the bus.
//
// The package holds definitions only; it imports nothing of the project.
package frame
