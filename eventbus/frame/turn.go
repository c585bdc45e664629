package frame

// The records of a turn and the presence frame. turn_start, turn_cancel
// and turn_end are real events in the session's log (they have ids, are
// replayed and resumed); only eventbus.Bus.StartTurn, eventbus.Turn and
// eventbus.Bus.Cancel write them. presence is a synthetic frame (id 0),
// never stored.
const (
	// TypeTurnStart opens a turn; data is [TurnData] with Turn and Session.
	TypeTurnStart = "turn_start"
	// TypeTurnEnd closes a turn, exactly once; data is [TurnData] with
	// Turn, Reason and, for ReasonError, Message.
	TypeTurnEnd = "turn_end"
	// TypeTurnCancel records a cancel request; data is [TurnData].
	TypeTurnCancel = "turn_cancel"
	// TypePresence is a subscriber's view of who is attached to its
	// session and what the agent is doing; data is [PresenceData]. Sent
	// first to a subscriber that asked for it, then on every change.
	TypePresence = "presence"
)

// Reasons carried in [TurnData.Reason] of a turn_end.
const (
	// ReasonComplete: the producer ended the turn without an error.
	ReasonComplete = "complete"
	// ReasonCancelled: a cancel was applied to the turn, its producer's
	// context ended, or its session was closed.
	ReasonCancelled = "cancelled"
	// ReasonError: the producer ended the turn with an error; Message
	// holds its text.
	ReasonError = "error"
	// ReasonProducerLost: the turn's producer can no longer be heard: its
	// bus was closed, or its node died and another node ended the turn.
	ReasonProducerLost = "producer_lost"
)

// TurnData is the payload of turn_start, turn_end and turn_cancel, what
// eventbus.Bus.Turn reports about a turn (then with StartID, and EndID once
// it ended), and the request of eventbus.Bus.Cancel (Turn, Cascade, By).
type TurnData struct {
	// Turn is the turn's id, unique within its session; never empty in
	// turn_start and turn_end. In a cancel, empty means every active turn
	// of the session.
	Turn string `json:"turn,omitempty"`
	// Session is the turn's session (set in turn_start).
	Session string `json:"session,omitempty"`
	// Reason and Message say why the turn ended (turn_end only).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// StartID and EndID are the ids of the turn's turn_start and turn_end
	// events; never set in a record's own payload (its id is its own).
	StartID uint64 `json:"startId,omitempty"`
	EndID   uint64 `json:"endId,omitempty"`
	// Cascade (turn_cancel only) also cancels every active turn of the
	// session's descendants.
	Cascade bool `json:"cascade,omitempty"`
	// By (turn_cancel only) names who asked: a client id, free text.
	By string `json:"by,omitempty"`
}

// PresenceData is the payload of a presence frame, and what
// eventbus.Bus.Presence reports: the state after the change the frame
// announces.
type PresenceData struct {
	// Session is the session the presence is of.
	Session string `json:"session"`
	// Clients is how many clients are attached: distinct client ids
	// (a client in its reconnect grace still counts) plus anonymous
	// subscribers.
	Clients int `json:"clients"`
	// Status is the agent's status: "idle" (also after every turn's end),
	// or what the producer set last.
	Status string `json:"status"`
	// Turn is the id of the session's active turn, "" when none.
	Turn string `json:"turn,omitempty"`
	// Joined and Left are the client ids that joined or left with this
	// change (never anonymous subscribers); empty in a snapshot.
	Joined []string `json:"joined,omitempty"`
	Left   []string `json:"left,omitempty"`
}
