package observe

// Stats is a snapshot of a bus's counters (eventbus.Bus.Stats). Counters
// are totals since the bus was made;
// Sessions and Subscribers are current.
type Stats struct {
	Sessions    int    `json:"sessions"`    // live sessions
	Subscribers int    `json:"subscribers"` // live subscribers
	Published   uint64 `json:"published"`   // events accepted, session_closed included
	Delivered   uint64 `json:"delivered"`   // live events queued for subscribers
	Replayed    uint64 `json:"replayed"`    // events handed out from replay buffers
	Dropped     uint64 `json:"dropped"`     // events dropped for a subscriber (drop_oldest, drop_newest, droppable)
	Evicted     uint64 `json:"evicted"`     // subscribers evicted (client_evicted)
	Warnings    uint64 `json:"warnings"`    // slow_client_warning frames
	Resyncs     uint64 `json:"resyncs"`     // state_resync_required frames before or after a replay
	Expired     uint64 `json:"expired"`     // sessions expired for idleness
	Guarded     uint64 `json:"guarded"`     // events the reinsert guard skipped; always 0 unless there is a bug
	// Retained is the number of closed sessions whose replay buffers are
	// kept now for the scopes of their open ancestors (at most
	// eventbus.Options.MaxRetained); RetainedDropped counts those dropped before
	// being reopened: at eventbus.Options.ClosedRetention, at the cap, or when
	// their tree's root closed.
	Retained        int    `json:"retained"`
	RetainedDropped uint64 `json:"retainedDropped"`
	// Turns as this bus's store applied their records (over a backend
	// every node counts every turn): started, ended (any reason), and of
	// those ended cancelled, with an error, or with their producer lost.
	TurnsStarted   uint64 `json:"turnsStarted"`
	TurnsEnded     uint64 `json:"turnsEnded"`
	TurnsCancelled uint64 `json:"turnsCancelled"`
	TurnsFailed    uint64 `json:"turnsFailed"`
	TurnsLost      uint64 `json:"turnsLost"`
	// CancelsHeld counts cancels held for turns not yet started;
	// CancelsExpired those that went unapplied (the hold ended, or newer
	// ones pushed them out).
	CancelsHeld    uint64 `json:"cancelsHeld"`
	CancelsExpired uint64 `json:"cancelsExpired"`
	// PresenceChanges counts the changes of sessions' presence (a frame
	// to each listening subscriber).
	PresenceChanges uint64 `json:"presenceChanges"`
}

// SessionInfo describes one session for listings (eventbus.Bus.Sessions).
type SessionInfo struct {
	ID          string `json:"id"`               // the session id
	Parent      string `json:"parent,omitempty"` // its parent's id, "" for a root
	Subscribers int    `json:"subscribers"`      // subscribers made on it (any scope)
	Buffered    int    `json:"buffered"`         // events in its replay buffer
	LastEventID uint64 `json:"lastEventId"`      // newest id published to it, 0 if none
}
