package eventbus

import (
	"context"
	"encoding/json"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// SnapshotProvider returns the application's state of a session as of an
// event id (see [Options.Snapshots]): state is any JSON value (the
// transcript so far, say), asOf the id of the newest event it reflects —
// every event in the subscription's scope up to asOf is in state, none
// after it. asOf must be an id the bus already gave (0: no event yet).
// It runs on the subscriber's goroutine, with no bus lock held, and may
// call back into the bus; ctx is the subscribe's context. An error (or an
// asOf the bus has not reached) makes the subscribe go on without a
// snapshot, as without a provider.
type SnapshotProvider func(ctx context.Context, session string) (state json.RawMessage, asOf uint64, err error)

// snapReq is one subscribe's snapshot: asked for at join
// (SubscribeOptions.Snapshot), or taken when the plan finds the
// subscriber's position lost (ring_evicted, epoch_reset). The provider is
// asked again when the events after its state were evicted before the
// subscriber could register (a publisher ran a whole buffer ahead in
// between), at most maxSnapshotAsks times per subscribe.
type snapReq struct {
	reason string // why a snapshot is wanted; "" none
	asks   int    // how often the provider was asked
	want   bool   // the plan asks for a (new) snapshot
	frame  *entry // the snapshot frame, once taken
}

// maxSnapshotAsks bounds how often one subscribe asks the provider.
const maxSnapshotAsks = 3

// wantsSnapshot reports, under the locks of the plan, whether j's
// position is lost and a snapshot should replace it: the bus has a
// provider that was not asked yet. It records why in sr.
func (b *Bus) wantsSnapshot(sr *snapReq, j *snapshotJob) bool {
	if sr == nil || sr.asks >= maxSnapshotAsks || b.cfg.Snapshots == nil || !j.hasCursor {
		return false
	}
	reason := ""
	switch {
	case j.reset:
		reason = frame.ReasonEpochReset
	case j.evicted > j.cursor:
		reason = frame.ReasonRingEvicted
	default:
		return false
	}
	if sr.reason == "" {
		sr.reason = reason // a snapshot asked for again keeps its first reason
	}
	sr.want = true
	return true
}

// takeSnapshot asks the provider for session's state, with no lock held,
// and on success returns the cursor the replay continues from (the id the
// state reflects) with sr.frame set; otherwise it returns cursor unchanged
// and the subscribe goes on as without a provider.
func (b *Bus) takeSnapshot(ctx context.Context, session string, sr *snapReq, cursor *Position) *Position {
	sr.asks++
	state, asOf, err := b.cfg.Snapshots(ctx, session)
	if err != nil || !json.Valid(state) {
		sr.asks = maxSnapshotAsks // a provider that fails is not asked again
		return cursor
	}
	b.w.await(b, ctx, asOf) // a bus over a backend may not have it yet
	if asOf > b.LastEventID() {
		sr.asks = maxSnapshotAsks
		return cursor
	}
	e := synth(session, frame.TypeSnapshot, frame.SnapshotData{Reason: sr.reason, LastEventID: asOf, State: state}, b.nowNanos())
	sr.frame = &e
	return &Position{Epoch: b.epoch, ID: asOf}
}
