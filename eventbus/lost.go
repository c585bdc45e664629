package eventbus

import (
	"fmt"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// PositionLostError is what [Bus.Subscribe] returns, with
// [SubscribeOptions.StrictCursor], for a cursor whose position is lost: it
// carries the payload of the state_resync_required frame that the same
// subscribe without StrictCursor would start with — Reason
// (frame.ReasonRingEvicted or frame.ReasonEpochReset), LastDeliveredID
// (the cursor's id), Epoch (the bus's) and, for ring_evicted,
// CompleteFromID. Nothing is registered. Check it with errors.As.
type PositionLostError struct {
	frame.ResyncData
	cursorEpoch string // the cursor's epoch, for the message only
}

// Error names the reason, the cursor and what the bus still has.
func (e *PositionLostError) Error() string {
	if e.Reason == frame.ReasonEpochReset {
		of := ""
		if e.cursorEpoch != "" {
			of = fmt.Sprintf(" of epoch %q", e.cursorEpoch)
		}
		return fmt.Sprintf("eventbus: position lost (%s): cursor %d%s is not of the bus's epoch %q or is past its newest id",
			e.Reason, e.LastDeliveredID, of, e.Epoch)
	}
	return fmt.Sprintf("eventbus: position lost (%s): events after cursor %d are gone; nothing is missing from id %d on",
		e.Reason, e.LastDeliveredID, e.CompleteFromID)
}

// refuseLost is wantsSnapshot's first step for a StrictCursor subscribe
// (sr.strict): it records in sr the PositionLostError of j's lost position
// for reason, so that Subscribe returns it instead of planning a replay.
func (sr *snapReq) refuseLost(reason, epoch string, j *snapshotJob) {
	sr.lost = &PositionLostError{ResyncData: frame.ResyncData{Reason: reason, LastDeliveredID: sr.cursor.ID, Epoch: epoch}, cursorEpoch: sr.cursor.Epoch}
	if reason == frame.ReasonRingEvicted {
		sr.lost.CompleteFromID = j.evicted + 1
	}
}
