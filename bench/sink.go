package main

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// clock is a monotonic clock in nanoseconds since the program started.
var clockStart = time.Now()

func now() int64 { return int64(time.Since(clockStart)) }

// Sink is one subscriber's consumer-side bookkeeping, the same for every
// system: each adapter calls Event for every real event the subscriber
// receives (synthetic frames excluded) and End when the system ends the
// subscription. Only the consuming goroutine calls Event.
type Sink struct {
	// Padding on both sides keeps one subscriber's hot fields off the cache
	// lines of the sinks allocated next to it (false sharing between
	// consumers would be the harness's cost, not the system's).
	_ [64]byte

	// Set by the workload before the subscriber can receive anything.
	base     atomic.Uint64 // ids ≤ base are warm-up probes and not counted; MaxUint64 until armed
	want     int64         // measured events expected; reaching it completes the sink
	pubNanos []int64       // W2: publish time of id base+1+i at index i (nil: no latency)
	lat      []int64       // W2: publish-to-receive samples
	sess     string        // the session subscribed to ("" = not checked)
	contig   bool          // ids are contiguous (one session, one publisher): check id == prev+1

	// Consumer-side state (one goroutine).
	prev      uint64
	n         int64
	reordered int64
	skipped   int64 // ids missing between two received ones (contig only), announced or not
	foreign   int64 // events of another session than sess
	seenLocal bool
	stamp     int64 // when non-zero, the arrival time to record instead of now()

	// Shared with the monitor.
	seen     atomic.Bool  // anything (probe included) arrived: registered
	progress atomic.Int64 // n, published every 64 events and at the end
	lastAt   atomic.Int64 // now() at the last progress publication
	gaps     atomic.Int64 // announced gaps (resync / drop frames)
	ended    atomic.Bool
	doneOnce sync.Once
	done     chan struct{}
	reason   atomic.Value // string

	_ [64]byte
}

func newSink(want int64) *Sink {
	k := &Sink{want: want, done: make(chan struct{})}
	k.base.Store(math.MaxUint64)
	return k
}

// arm starts counting: ids > base are measured. Call it before publishing
// the measured events.
func (k *Sink) arm(base uint64) { k.base.Store(base) }

// EventIn records the arrival of event id of session sess: the identity
// check for systems whose delivery names the session.
func (k *Sink) EventIn(sess string, id uint64) {
	if k.sess != "" && sess != k.sess {
		k.foreign++
		return
	}
	k.Event(id)
}

// Event records the arrival of event id.
func (k *Sink) Event(id uint64) {
	if !k.seenLocal {
		k.seenLocal = true
		k.seen.Store(true)
	}
	base := k.base.Load()
	if id <= base {
		return
	}
	if id <= k.prev {
		k.reordered++
		return
	}
	if k.contig {
		from := max(k.prev, base)
		if id != from+1 {
			k.skipped += int64(id - from - 1)
		}
	}
	k.prev = id
	k.n++
	if k.pubNanos != nil {
		if i := id - base - 1; i < uint64(len(k.pubNanos)) {
			k.lat = append(k.lat, now()-atomic.LoadInt64(&k.pubNanos[i]))
		}
	}
	if k.n == k.want {
		k.progress.Store(k.n)
		k.lastAt.Store(k.clock())
		k.finish()
	} else if k.n&63 == 0 {
		k.progress.Store(k.n)
		k.lastAt.Store(k.clock())
	}
}

func (k *Sink) clock() int64 {
	if k.stamp != 0 {
		return k.stamp
	}
	return now()
}

// Gap records a frame that announces lost events (resync, drops).
func (k *Sink) Gap() { k.gaps.Add(1) }

// End records that the system ended the subscription (eviction, disconnect).
func (k *Sink) End(reason string) {
	if k.ended.Swap(true) {
		return
	}
	k.reason.Store(reason)
	k.progress.Store(k.n)
	k.lastAt.Store(now())
	k.finish()
}

func (k *Sink) finish() { k.doneOnce.Do(func() { close(k.done) }) }

func (k *Sink) complete() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// waitSinks waits until every sink completed or ended, or until nothing
// progressed for quiet after pubDone was closed (events lost). It returns the
// latest lastAt over the sinks.
func waitSinks(sinks []*Sink, pubDone <-chan struct{}, quiet time.Duration) int64 {
	var sum, lastSum int64 = 0, -1
	lastChange := time.Now()
	published := false
	for {
		all := true
		sum = 0
		for _, k := range sinks {
			if !k.complete() {
				all = false
			}
			sum += k.progress.Load()
		}
		if all {
			break
		}
		if !published {
			select {
			case <-pubDone:
				published = true
				lastChange = time.Now()
			default:
			}
		}
		if sum != lastSum {
			lastSum, lastChange = sum, time.Now()
		} else if published && time.Since(lastChange) > quiet {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	var last int64
	for _, k := range sinks {
		if t := k.lastAt.Load(); t > last {
			last = t
		}
	}
	return last
}
