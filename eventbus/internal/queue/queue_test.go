package queue

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// The live counters pack frames and bytes into one word; the difference of
// two packed counters is exact at the limits' extremes.
func TestPackedLiveCounters(t *testing.T) {
	var enq, taken uint64
	const frames, cost = 1_000_000, 1 << 10
	taken = ^uint64(0) - 5 // wrapped counters still subtract exactly
	enq = taken
	for range frames {
		enq += packLive(cost)
	}
	enq += packLive(1 << 30) // one event past a 1 GiB byte limit
	f, by := unpackLive(enq - taken)
	assert.EqualValues(t, frames+1, f)
	assert.EqualValues(t, int64(frames)*cost+1<<30, by)
	enq -= packLive(cost) // drop_oldest takes one back
	taken += packLive(1 << 30)
	f, by = unpackLive(enq - taken)
	assert.EqualValues(t, frames-1, f)
	assert.EqualValues(t, int64(frames-1)*cost, by)
}

func rec(id uint64, size int) *Record {
	return &Record{ID: id, Session: "s", Type: "t", Data: make([]byte, size)}
}

// drainAll takes everything queued, as the consumer does.
func drainAll(q *Queue, rd *Reader) []Entry {
	q.Drain(rd)
	var out []Entry
	for e, _ := rd.Take(nil); e != nil; e, _ = rd.Take(nil) {
		out = append(out, *e)
	}
	return out
}

// Each policy at the frame limit: drop_newest and drop_oldest announce
// one events_dropped run where the events were; drop_subscriber queues
// client_evicted last and tells the owner to end the subscriber.
func TestDeliverPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy Policy
		want   []Outcome
		kinds  []Kind
	}{
		{DropNewest, []Outcome{Queued, Queued, Dropped, Dropped}, []Kind{KindLive, KindLive, KindDropped}},
		{DropOldest, []Outcome{Queued, Queued, DroppedOld, DroppedOld}, []Kind{KindDropped, KindLive, KindLive}},
		{DropSubscriber, []Outcome{Queued, Queued, Evicted}, []Kind{KindLive, KindLive, KindFrame}},
	} {
		q := &Queue{Lim: Limits{Frames: 2, Bytes: 1 << 20, Policy: tc.policy}}
		var rd Reader
		var got []Outcome
		for id := uint64(1); id <= uint64(len(tc.want)); id++ {
			got = append(got, q.Deliver(&rd, "s", rec(id, 1), false))
		}
		assert.Equal(t, tc.want, got, "policy %d", tc.policy)
		var kinds []Kind
		es := drainAll(q, &rd)
		for _, e := range es {
			kinds = append(kinds, e.Kind)
		}
		assert.Equal(t, tc.kinds, kinds, "policy %d", tc.policy)
		if tc.policy != DropSubscriber {
			d := es[map[Policy]int{DropNewest: 2, DropOldest: 0}[tc.policy]].Drop
			assert.Equal(t, 2, d.Count, "one run for both drops")
		}
		f, b := q.Live(&rd)
		assert.Zero(t, f, "everything taken is out of the limits")
		assert.Zero(t, b)
	}
}

// The warning comes once per episode, at 75 % of a limit, and is re-armed
// only when both axes fall to 37.5 %; a droppable type is dropped from 75 %.
func TestDeliverWarningAndDroppable(t *testing.T) {
	q := &Queue{Lim: Limits{Frames: 8, Bytes: 1 << 20, Policy: DropOldest, Warn: true}}
	var rd Reader
	var outs []Outcome
	for id := uint64(1); id <= 7; id++ {
		outs = append(outs, q.Deliver(&rd, "s", rec(id, 1), false))
	}
	assert.Equal(t, []Outcome{Queued, Queued, Queued, Queued, Queued, Warned, Queued}, outs)
	assert.Equal(t, Dropped, q.Deliver(&rd, "s", rec(8, 1), true), "a droppable type above 75 %")
	es := drainAll(q, &rd)
	assert.Equal(t, KindFrame, es[6].Kind, "the warning stands after the event that reached 75 %")
	assert.Equal(t, KindDropped, es[len(es)-1].Kind)
	for id := uint64(9); id <= 14; id++ {
		q.Deliver(&rd, "s", rec(id, 1), false)
	}
	warnings := 0
	for _, e := range drainAll(q, &rd) {
		if e.Kind == KindFrame {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "re-armed after the drain, warned again at 75 %")
}

// A targeted frame counts against the limits and is refused at them; one
// oversized frame fits an empty queue.
func TestPushTargeted(t *testing.T) {
	q := &Queue{Lim: Limits{Frames: 1, Bytes: 4, Policy: DropSubscriber}}
	var rd Reader
	assert.True(t, q.PushTargeted(&rd, rec(0, 10)), "oversized into an empty queue")
	assert.False(t, q.PushTargeted(&rd, rec(0, 1)), "full")
	drainAll(q, &rd)
	assert.True(t, q.PushTargeted(&rd, rec(0, 1)))
}

// The replay snapshot is read in order, one record at a time or in runs of
// at most max, across both, and is released once spent.
func TestReaderReplays(t *testing.T) {
	recs := make([]*Record, 7)
	for i := range recs {
		recs[i] = &Record{ID: uint64(i + 1)}
	}
	var rd Reader
	rd.SetReplay(append([]*Record(nil), recs...))
	var got []uint64
	run := rd.NextReplays(3)
	assert.Len(t, run, 3)
	for _, r := range run {
		got = append(got, r.ID)
	}
	clear(run)
	got = append(got, rd.NextReplay().ID)
	run = rd.NextReplays(10) // more than is left
	assert.Len(t, run, 3)
	for _, r := range run {
		got = append(got, r.ID)
	}
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, got)
	assert.Nil(t, rd.NextReplays(3), "spent")
	assert.Nil(t, rd.NextReplay(), "spent")
	assert.Nil(t, rd.pre, "the snapshot is released once spent")
	assert.False(t, rd.Replaying())
	rd.SetReplay(recs[:0])
	assert.False(t, rd.Replaying(), "an empty snapshot is nothing to replay")
	rd.SetReplay(recs[:1])
	assert.True(t, rd.Replaying())
}

// The publisher's half of a Queue (what DeliverLockFree touches) ends
// within its first 112 bytes and the half the consumer writes at a Drain
// starts there: the Subscription that holds a Queue at byte 16 keeps the
// two on different cache lines (TestSubscriptionLayout).
func TestQueueLayout(t *testing.T) {
	var q Queue
	assert.LessOrEqual(t, unsafe.Offsetof(q.laneFull)+unsafe.Sizeof(q.laneFull), uintptr(112))
	assert.LessOrEqual(t, unsafe.Offsetof(q.warned)+unsafe.Sizeof(q.warned), uintptr(112))
	assert.EqualValues(t, 112, unsafe.Offsetof(q.q))
}
