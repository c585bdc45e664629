package queue

import (
	"slices"
	"sync/atomic"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Policy is the overflow policy: what Deliver does when the live queue is
// full (eventbus.OverflowPolicy's values, as a byte to keep the queue
// small).
type Policy uint8

// The overflow policies.
const (
	DropSubscriber Policy = iota // evict: client_evicted, then the owner ends
	DropOldest                   // drop the oldest queued live events, announced
	DropNewest                   // drop the new event, announced
)

// Limits are a queue's live limits, fixed when the subscriber is made.
type Limits struct {
	Bytes  int64 // live data bytes, 1 B–1 GiB; one larger event fits an empty queue
	Frames int32 // live frames, 1–1,000,000
	Policy Policy
	Warn   bool // send slow_client_warning at 75 %
}

// Outcome says what Deliver did with a record.
type Outcome uint8

const (
	Queued     Outcome = iota + 1
	Warned             // queued, and a slow_client_warning after it
	Dropped            // the new record was dropped (announced)
	DroppedOld         // older records were dropped (announced), the new one queued
	Evicted            // client_evicted queued last: the owner must end the subscriber
)

// Delivered reports whether the new record was queued: Queued, Warned and
// DroppedOld.
func (o Outcome) Delivered() bool { return o == Queued || o == Warned || o == DroppedOld }

// The live limits count frames and bytes; both counters the publisher and
// the consumer keep (what was queued, what was taken) pack the two into one
// uint64 — frames in the top liveFrameBits bits, bytes below — so that the
// consumer publishes what it took with one atomic add per event. Both sides
// only ever add to (or, dropping, subtract from) their own counter, modulo
// 2⁶⁴, and the publisher only ever takes the difference: queued − taken is
// exactly frames<<liveByteBits + bytes as long as the live frames stay below
// 2²⁴ (Frames ≤ 1,000,000) and the live bytes below 2⁴⁰ (Bytes ≤ 1 GiB,
// plus the one event that may exceed it on an empty queue).
const (
	liveByteBits  = 40
	liveByteMask  = 1<<liveByteBits - 1
	liveFrameUnit = 1 << liveByteBits
)

// packLive is one live frame of cost bytes in the packed form.
func packLive(cost int64) uint64 { return liveFrameUnit + uint64(cost) }

// unpackLive splits a difference of packed counters.
func unpackLive(d uint64) (frames, bytes int64) {
	return int64(d >> liveByteBits), int64(d & liveByteMask)
}

// Queue is the publishers' side of a subscriber's queue. Its publisher
// (one goroutine at a time: the owner serialises its publishers) offers
// live records with [Queue.DeliverLockFree] without the owner's lock
// while they are away from every limit; every other method runs with the
// owner's lock held (the lock that serialises the other writers, the
// publisher's locked deliveries and the consumer's Drain). None blocks.
// The zero value with Lim set is ready.
//
// Entries live in two places: the lane, a single-producer ring of live
// records the publisher fills without the owner's lock, and q, filled
// under it. Every writer under the lock first moves the lane's records to
// the end of q (flush), so q always precedes the lane and the order of
// the whole queue is q, then the lane.
type Queue struct {
	Lim Limits
	// enq packs the live frames ever queued (minus those dropped while
	// queued) and their bytes: the publisher adds with a compare-and-swap
	// without the owner's lock, the other writers add under it. seen is
	// the publisher's copy of the reader's consumed as of its last
	// refresh (liveBound).
	enq  atomic.Uint64
	seen uint64
	// The lane: ring[tail%len] is the next slot the publisher fills; it
	// publishes the slot with tail. head (below, written under the
	// owner's lock) is where the lane's unmoved records begin; headSeen is
	// the publisher's copy of it.
	ring     []*Record
	tail     atomic.Uint64
	headSeen uint64
	warned   bool // a warning episode is on (re-armed at ≤ 37.5 %)
	laneFull bool // the lane was found full: the next locked delivery grows it

	// Keeps what the consumer writes at each Drain (below) off the
	// publisher's cache lines (above); see publisherBytes.
	_ [32]byte

	// Under the owner's lock: q[qh:] are the entries queued and not yet
	// drained, ahead of the lane's.
	q    []Entry
	qh   int32
	head atomic.Uint64
}

// The lane's sizes: it starts at laneMin slots on the first delivery and
// doubles, up to laneMax, each time the publisher finds it full.
const (
	laneMin = 8
	laneMax = 512
)

// Reader is the consumer's side: the batch it took with Drain, read
// without the owner's lock by one goroutine at a time. consumed is written
// on every event the consumer takes and read by publishers only near a
// limit; it lives apart from Queue so the two sides need not share a
// cache line.
type Reader struct {
	consumed atomic.Uint64
	local    []Entry
	li, pi   int32     // the next of local, of pre
	pre      []*Record // the replay snapshot, read before local; pre[pi:] not yet read
}

// Live returns the live frames and bytes queued and not yet taken by the
// consumer, exactly (counting a record the publisher is adding to the
// lane). The owner's lock is held.
func (q *Queue) Live(rd *Reader) (frames, bytes int64) {
	c := rd.consumed.Load() // first: every record it counts is in enq
	return unpackLive(q.enq.Load() - c)
}

// refresh is Live for the publisher: it also refreshes the publisher's
// copy of the reader's counter (liveBound).
func (q *Queue) refresh(rd *Reader) (frames, bytes int64) {
	q.seen = rd.consumed.Load()
	return unpackLive(q.enq.Load() - q.seen)
}

// liveBound is Live from the publisher's copy of the reader's counter,
// without reading it: an upper bound (the consumer only ever takes), exact
// as of the last refresh. Deliver uses it away from every threshold, so
// that a delivery does not pull the cache line the consumer writes on each
// event; near a threshold it refreshes, so every decision and every figure
// is the one the exact values give.
func (q *Queue) liveBound() (frames, bytes int64) {
	return unpackLive(q.enq.Load() - q.seen)
}

// DeliverLockFree is Deliver's common case without the owner's lock: when
// r, counted with everything queued, stays below 75 % of both limits and no
// warning episode is on (so no threshold, drop or warning is in play) and
// the lane has a free slot, it queues r at the end of the lane and returns
// true; otherwise it does nothing and returns false, and the publisher
// calls Deliver under the owner's lock. Only the publisher calls it,
// without the owner's lock.
func (q *Queue) DeliverLockFree(r *Record) bool {
	if q.warned {
		return false
	}
	cost := int64(len(r.Data))
	enq := q.enq.Load()
	frames, bytes := unpackLive(enq - q.seen)
	if (frames+1)*4 >= int64(q.Lim.Frames)*3 || (bytes+cost)*4 >= q.Lim.Bytes*3 {
		return false
	}
	t := q.tail.Load()
	if t-q.headSeen >= uint64(len(q.ring)) {
		q.headSeen = q.head.Load()
		if t-q.headSeen >= uint64(len(q.ring)) {
			q.laneFull = true
			return false
		}
	}
	// Counted with a compare-and-swap: a frame another writer queued
	// meanwhile under the owner's lock changed the count, and the
	// decision is made again under the lock.
	if !q.enq.CompareAndSwap(enq, enq+packLive(cost)) {
		return false
	}
	q.ring[t&uint64(len(q.ring)-1)] = r
	q.tail.Store(t + 1)
	return true
}

// flush moves the lane's records to the end of q. The owner's lock is
// held.
func (q *Queue) flush() {
	h, t := q.head.Load(), q.tail.Load()
	if h == t {
		return
	}
	q.q = q.takeLane(slices.Grow(q.q, int(t-h)), h, t)
}

// takeLane appends the lane's records h up to t to dst, frees their
// slots and marks them moved. The owner's lock is held.
func (q *Queue) takeLane(dst []Entry, h, t uint64) []Entry {
	m := uint64(len(q.ring) - 1)
	for ; h != t; h++ {
		dst = append(dst, Entry{Rec: q.ring[h&m]})
		q.ring[h&m] = nil // let the data go
	}
	q.head.Store(t)
	return dst
}

// growLane gives the lane its first slots, or twice as many when the
// publisher found it full, up to laneMax. The publisher calls it with the
// owner's lock held, the lane empty (flushed).
func (q *Queue) growLane() {
	switch {
	case q.ring == nil:
		q.ring = make([]*Record, laneMin)
	case q.laneFull && len(q.ring) < laneMax:
		q.ring = make([]*Record, 2*len(q.ring))
	}
	q.laneFull = false
}

// Figures describes the live queue now.
func (q *Queue) Figures(rd *Reader) frame.QueueFigures {
	f, b := q.Live(rd)
	return frame.QueueFigures{QueueSize: int(f), MaxQueued: int(q.Lim.Frames), QueuedBytes: b, MaxQueuedBytes: q.Lim.Bytes}
}

// Deliver offers the live record r to the queue of a subscriber of
// session and says what happened. droppable marks a type dropped at the
// warning level (OpenClaw's dropIfSlow). On Evicted the client_evicted
// frame is queued last and the owner must end the subscriber.
func (q *Queue) Deliver(rd *Reader, session string, r *Record, droppable bool) Outcome {
	q.flush()
	q.growLane()
	max, maxB := int64(q.Lim.Frames), q.Lim.Bytes
	cost := int64(len(r.Data))
	frames, bytes := q.liveBound()
	// Every threshold below (warning at 75 % counting this event, the
	// droppable cut at 75 %, overflow, the warning's re-arm) implies this
	// condition; the bound is at least the exact value, so when the bound
	// does not meet it, the exact values decide nothing either.
	if q.warned || (frames+1)*4 >= max*3 || (bytes+cost)*4 >= maxB*3 {
		frames, bytes = q.refresh(rd)
	}
	if q.warned && frames*8 <= max*3 && bytes*8 <= maxB*3 {
		q.warned = false // hysteresis: re-armed at ≤ 37.5 % on both axes
	}
	if droppable && (frames*4 >= max*3 || bytes*4 >= maxB*3) {
		q.dropNewest(session, r) // OpenClaw's dropIfSlow
		return Dropped
	}
	overFrames := frames >= max
	overBytes := frames > 0 && bytes+cost > maxB
	if overFrames || overBytes {
		switch q.Lim.Policy {
		case DropNewest:
			q.dropNewest(session, r)
			return Dropped
		case DropOldest:
			if !q.dropOldest(rd, session, cost) {
				q.dropNewest(session, r)
				return Dropped
			}
			q.pushLive(r, cost)
			return DroppedOld
		default:
			reason := frame.ReasonQueueOverflow
			if !overFrames {
				reason = frame.ReasonQueueBytesOverflow
			}
			q.q = append(q.q, Synth(session, frame.TypeClientEvicted, frame.ClientEvictedData{
				QueueFigures: q.Figures(rd), Reason: reason, DroppedAfter: r.ID,
			}, r.Nanos))
			return Evicted
		}
	}
	q.pushLive(r, cost)
	if q.Lim.Warn && !q.warned {
		frames, bytes = frames+1, bytes+cost
		f, b := frames*4 >= max*3, bytes*4 >= maxB*3
		if f || b {
			q.warned = true
			th := "frames"
			switch {
			case f && b:
				th = "frames_and_bytes"
			case b:
				th = "bytes"
			}
			q.q = append(q.q, Synth(session, frame.TypeSlowClientWarning, frame.SlowClientWarningData{
				QueueFigures: q.Figures(rd), LastEventID: r.ID, Threshold: th,
			}, r.Nanos))
			return Warned
		}
	}
	return Queued
}

func (q *Queue) pushLive(r *Record, cost int64) {
	q.q = append(q.q, Entry{Rec: r})
	q.enq.Add(packLive(cost))
}

// Push queues an entry that never counts against the limits (replay,
// synthetic frames, a forced event such as session_closed).
func (q *Queue) Push(e Entry) {
	q.flush()
	q.q = append(q.q, e)
}

// PushTargeted queues r as a targeted frame, counted against the live
// limits, when it fits them (one oversized frame fits an empty queue); it
// reports whether it did. drop_oldest never drops it.
func (q *Queue) PushTargeted(rd *Reader, r *Record) bool {
	q.flush()
	frames, bytes := q.Live(rd)
	cost := int64(len(r.Data))
	if frames >= int64(q.Lim.Frames) || (frames > 0 && bytes+cost > q.Lim.Bytes) {
		return false
	}
	q.q = append(q.q, Entry{Rec: r, Kind: KindTargeted})
	q.enq.Add(packLive(cost))
	return true
}

// PushGap announces that events up to upTo were lost before this node
// received them: a feed_gap frame for session, or, when the queue already
// ends with one, that frame extended. It reports whether a frame was added.
func (q *Queue) PushGap(session string, upTo uint64, nanos int64) bool {
	q.flush()
	if n := len(q.q); n > int(q.qh) && q.q[n-1].Kind == KindGap {
		d := q.q[n-1].Drop
		d.Earliest = max(d.Earliest, upTo+1)
		return false
	}
	q.q = append(q.q, Entry{
		Rec:  &Record{Session: session, Type: frame.TypeStateResyncRequired, Nanos: nanos},
		Kind: KindGap,
		Drop: &Drop{Earliest: upTo + 1},
	})
	return true
}

// Prepend puts head before everything queued (the frames that follow a
// replay go ahead of live events queued meanwhile).
func (q *Queue) Prepend(head []Entry) {
	q.flush()
	q.q = append(head, q.q[q.qh:]...)
	q.qh = 0
}

// Pending reports whether entries are queued and not yet drained.
func (q *Queue) Pending() bool {
	return int(q.qh) < len(q.q) || q.head.Load() != q.tail.Load()
}

// Clear drops everything queued (a discarding end).
func (q *Queue) Clear() {
	q.flush()
	clear(q.q)
	q.q, q.qh = nil, 0
}

// dropNewest drops r for this subscriber and announces it: the run is
// merged into an events_dropped frame at the tail of the queue, or a new
// one is appended, so the frame stands exactly where the gap is.
func (q *Queue) dropNewest(session string, r *Record) {
	if n := len(q.q); n > int(q.qh) && q.q[n-1].Kind == KindDropped {
		d := q.q[n-1].Drop
		d.Last = r.ID
		d.Count++
		return
	}
	q.q = append(q.q, Entry{
		Rec:  &Record{Session: session, Type: frame.TypeStateResyncRequired, Nanos: r.Nanos},
		Kind: KindDropped,
		Drop: &Drop{First: r.ID, Last: r.ID, Count: 1},
	})
}

// dropOldest drops the oldest queued live events until cost more bytes and
// one more frame fit, replacing them by one events_dropped frame placed
// where they stood. It returns false when no queued live event is left to
// drop (the consumer already holds them all).
func (q *Queue) dropOldest(rd *Reader, session string, cost int64) bool {
	for {
		frames, bytes := q.refresh(rd)
		if frames < int64(q.Lim.Frames) && (frames == 0 || bytes+cost <= q.Lim.Bytes) {
			return true
		}
		qh := int(q.qh)
		i := qh
		for i < len(q.q) && q.q[i].Kind != KindLive { // targeted frames are not the policy's to drop
			i++
		}
		if i == len(q.q) {
			return false
		}
		victim := q.q[i].Rec
		q.enq.Add(-packLive(int64(len(victim.Data))))
		// Extend the run before the victim when nothing with an id stands
		// between them (a slow_client_warning may): one gap, one frame.
		j := i - 1
		for j >= qh && q.q[j].Kind == KindFrame {
			j--
		}
		if j >= qh && q.q[j].Kind == KindDropped {
			d := q.q[j].Drop
			d.Last = victim.ID
			d.Count++
			copy(q.q[qh+1:i+1], q.q[qh:i])
			q.q[qh] = Entry{}
			q.qh++
			continue
		}
		q.q[i] = Entry{
			Rec:  &Record{Session: session, Type: frame.TypeStateResyncRequired, Nanos: victim.Nanos},
			Kind: KindDropped,
			Drop: &Drop{First: victim.ID, Last: victim.ID, Count: 1},
		}
	}
}

// Drain is the consumer's step: it takes every entry queued since the last
// drain into rd's batch in one step, giving the publishers rd's spent
// buffer back (zero allocation in steady state). The owner's lock is held.
//
// Taking the whole queue under the lock means a publish lands either in
// this batch or in the next one — never lost, never read twice.
func (q *Queue) Drain(rd *Reader) {
	if int(q.qh) == len(q.q) {
		// Only the lane's records (the common case): copied into the
		// reader's own spent buffer.
		h, t := q.head.Load(), q.tail.Load()
		n := int(t - h)
		local := rd.local[:0]
		if cap(local) < n || cap(local) > 2*laneMax {
			// One allocation for the batch (at most laneMax records: at
			// most 2*laneMax kept); and do not keep a burst-sized buffer
			// from the locked queue forever.
			local = make([]Entry, 0, max(2*n, laneMin))
		}
		rd.local, rd.li = q.takeLane(local, h, t), 0
		q.q, q.qh = q.q[:0], 0
		return
	}
	q.flush()
	spent := rd.local[:0]
	rd.local, rd.li = q.q[q.qh:], 0
	if cap(spent) > 4*cap(rd.local)+64 {
		spent = nil // do not keep a burst-sized buffer forever
	}
	q.q, q.qh = spent, 0
}

// MergeDrops folds the events_dropped runs that publishers queued after
// the consumer took its batch, and that come right after d (nothing with
// an id between), into d: consecutive drops make one frame, not one per
// batch the consumer happened to take. The owner's lock is held.
func (q *Queue) MergeDrops(d *Drop) {
	for int(q.qh) < len(q.q) && q.q[q.qh].Kind == KindDropped {
		next := q.q[q.qh].Drop
		d.Last = next.Last
		d.Count += next.Count
		q.q[q.qh] = Entry{}
		q.qh++
	}
}

// Take returns the next entry of the consumer's batch, or nil when the
// batch is spent (Drain again, or wait). It takes a counted entry out of
// the live limits. last reports whether the entry was the batch's last.
// The caller clears the entry (*e = Entry{}) once it has read it.
//
// With owed non-nil the entry's share of the live limits is added to
// *owed instead of the counter publishers read: a batch reader takes
// several entries and publishes what it took with one Settle, before it
// next takes the owner's lock and before it hands its batch out.
func (rd *Reader) Take(owed *uint64) (e *Entry, last bool) {
	if int(rd.li) >= len(rd.local) {
		return nil, false
	}
	e = &rd.local[rd.li]
	rd.li++
	if e.Counts() {
		if owed != nil {
			*owed += packLive(e.Cost())
		} else {
			rd.consumed.Add(packLive(e.Cost()))
		}
	}
	return e, int(rd.li) == len(rd.local)
}

// Settle adds what a batch reader took (Take's owed) to the counter the
// publishers read, in one atomic step, and zeroes owed.
func (rd *Reader) Settle(owed *uint64) {
	if *owed != 0 {
		rd.consumed.Add(*owed)
		*owed = 0
	}
}

// SetReplay hands the consumer the replay snapshot, read (NextReplay)
// before anything drained. Only before the consumer starts reading.
func (rd *Reader) SetReplay(pre []*Record) {
	if len(pre) == 0 {
		pre = nil // nothing to replay: Replaying is false
	}
	rd.pre, rd.pi = pre, 0
}

// NextReplay returns the next record of the replay snapshot, nil when it
// is spent. By index, not by reslicing: the snapshot is read without a
// pointer write per event (only the slot's, to let the data go).
func (rd *Reader) NextReplay() *Record {
	if int(rd.pi) >= len(rd.pre) {
		return nil
	}
	r := rd.pre[rd.pi]
	rd.pre[rd.pi] = nil // let the data go once read
	rd.pi++
	if int(rd.pi) == len(rd.pre) {
		rd.pre, rd.pi = nil, 0
	}
	return r
}

// Replaying reports whether records of the replay snapshot are left.
func (rd *Reader) Replaying() bool { return rd.pre != nil }

// NextReplays returns the next records of the replay snapshot, at most
// max, and moves past them; nil when it is spent. The caller reads them in
// place and then clears the returned slice (clear), which lets their data
// go: one bulk clear per batch instead of a pointer write per record.
func (rd *Reader) NextReplays(max int) []*Record {
	i := int(rd.pi)
	if i >= len(rd.pre) {
		return nil
	}
	j := min(len(rd.pre), i+max)
	out := rd.pre[i:j:j]
	rd.pi = int32(j)
	if j == len(rd.pre) {
		rd.pre, rd.pi = nil, 0
	}
	return out
}

// Reset drops the consumer's batch and what is left of the replay (a
// discarding end).
func (rd *Reader) Reset() {
	clear(rd.local)
	rd.local, rd.li, rd.pre, rd.pi = nil, 0, nil, 0
}
