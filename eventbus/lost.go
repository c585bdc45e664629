package eventbus

import (
	"fmt"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// PositionLostError is what [Bus.Subscribe] returns, with
// [SubscribeOptions.StrictCursor] set, for a cursor whose position is
// lost: events in scope after it are gone from the replay buffers
// (Reason frame.ReasonRingEvicted), or it is of another epoch or at or past
// the next id (frame.ReasonEpochReset). Without StrictCursor the same
// subscribe succeeds and its first frame is state_resync_required with that
// reason. Nothing is registered and no snapshot is asked for. Check it with
// errors.As.
type PositionLostError struct {
	Reason string   // frame.ReasonRingEvicted or frame.ReasonEpochReset
	Cursor Position // the position asked for
	Epoch  string   // the bus's epoch
	// CompleteFromID (ring_evicted only; 0 for epoch_reset) is the lowest id
	// from which nothing in scope is missing: a cursor at CompleteFromID-1
	// resumes without a gap, as long as that history is still held.
	CompleteFromID uint64
}

// Error names the reason, the cursor and what the bus still has.
func (e *PositionLostError) Error() string {
	if e.Reason == frame.ReasonEpochReset {
		return fmt.Sprintf("eventbus: position lost (%s): cursor %d of epoch %q is not of the bus's epoch %q or is past its newest id",
			e.Reason, e.Cursor.ID, e.Cursor.Epoch, e.Epoch)
	}
	return fmt.Sprintf("eventbus: position lost (%s): events after cursor %d are gone; nothing is missing from id %d on",
		e.Reason, e.Cursor.ID, e.CompleteFromID)
}

// refuseLost is wantsSnapshot's first step for a StrictCursor subscribe
// (sr.strict): it records in sr the PositionLostError of j's lost position
// for reason, so that Subscribe returns it instead of planning a replay.
func (sr *snapReq) refuseLost(reason, epoch string, j *snapshotJob) {
	sr.lost = &PositionLostError{Reason: reason, Cursor: sr.cursor, Epoch: epoch}
	if reason == frame.ReasonRingEvicted {
		sr.lost.CompleteFromID = j.evicted + 1
	}
}
