package eventbus

import "github.com/replaybus/replaybus/eventbus/observe"

// SessionInfo returns what [Bus.Sessions] lists for session id — its
// parent, subscribers, events buffered and LastEventID, the newest id
// published to it — and false when no such session exists (never created,
// closed or expired). Like Sessions it never waits for a publish: one
// lookup in the session registry and atomic reads, O(1). Safe for
// concurrent use.
func (b *Bus) SessionInfo(id string) (observe.SessionInfo, bool) { return b.hist.SessionInfo(id) }
