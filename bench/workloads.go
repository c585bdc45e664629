package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// makePayload returns an n-byte JSON object shaped like an ACP
// agent_message_chunk session/update.
func makePayload(n int) []byte {
	const prefix = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	const suffix = `"}}`
	fill := n - len(prefix) - len(suffix)
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", n/40+1)[:fill]
	return []byte(prefix + text + suffix)
}

var (
	payload256 = makePayload(256)
	payload2K  = makePayload(2048)
)

// totals sums what the sinks counted.
type totals struct {
	n, reordered, gaps, skipped, foreign int64
	ended                                int
}

func sumSinks(sinks []*Sink) (t totals) {
	for _, k := range sinks {
		t.n += k.n
		t.reordered += k.reordered
		t.skipped += k.skipped
		t.foreign += k.foreign
		t.gaps += k.gaps.Load()
		if k.ended.Load() {
			t.ended++
		}
	}
	return
}

// cpuNanos is the CPU time (user + system) this process has used so far:
// every system here runs in-process, so the delta over a phase is what the
// system (and its consumers) spent.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// quiet is how long nothing may arrive, after the last publish, before the
// events still missing count as lost. It is generous because a machine
// shared with other work can starve the consumers for a while; lossy
// systems pay it once per run, and their figures end at their last
// delivery, not at the wait's end.
const quiet = time.Second

// ---- W1 fan-out ----

type w1Result struct {
	nsPerDelivery     float64
	allocsPerDelivery float64 // process-wide mallocs ÷ (events × subscribers), delivered or not
	cpuPerDelivery    float64 // process CPU ns ÷ deliveries
	deliveries        int64
	lost, reordered   int64
	skipped, foreign  int64 // ids missing between received ones; events of another session
	evicted           int
	gaps              int64
}

func runW1(sys System, S, N int, lossless bool) (w1Result, error) {
	var res w1Result
	inst, err := sys.Open(Opts{Ring: 100, Lossless: lossless})
	if err != nil {
		return res, err
	}
	const sess = "w1"
	sinks := make([]*Sink, S)
	for i := range sinks {
		sinks[i] = newSink(int64(N))
		sinks[i].sess, sinks[i].contig = sess, true
	}
	if err := subscribeArmed(inst, sess, sinks); err != nil {
		return res, err
	}
	pub, err := inst.Publisher(sess)
	if err != nil {
		inst.Close()
		return res, err
	}
	w, err := publishMeasured([]func([]byte) (uint64, error){pub}, N, sinks, quiet)
	inst.Close()
	if err != nil {
		return res, err
	}
	return fanoutResult(sys.Name, w, sumSinks(sinks), int64(N)*int64(S))
}

// window is what one measured publish phase cost, from the first publish
// to the last delivery: wall ns, process CPU ns and process-wide mallocs.
type window struct {
	ns, cpu int64
	mallocs uint64
}

// publishMeasured publishes n events of payload256, round robin over pubs,
// waits until the sinks have them all or nothing has arrived for idle
// (waitSinks), and returns what that cost. A publish error stops it and is
// returned.
func publishMeasured(pubs []func([]byte) (uint64, error), n int, sinks []*Sink, idle time.Duration) (window, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pubDone := make(chan struct{})
	c0 := cpuNanos()
	t0 := now()
	for i, j := 0, 0; i < n; i++ {
		if _, err := pubs[j](payload256); err != nil {
			close(pubDone)
			return window{}, err
		}
		if j++; j == len(pubs) {
			j = 0
		}
	}
	close(pubDone)
	tEnd := waitSinks(sinks, pubDone, idle)
	c1 := cpuNanos()
	runtime.ReadMemStats(&m1)
	return window{ns: tEnd - t0, cpu: c1 - c0, mallocs: m1.Mallocs - m0.Mallocs}, nil
}

// fanoutResult is the figures of a fan-out run (W1, W5, W8) from its
// measured window and the sinks' totals; want is the deliveries a lossless
// run makes (events × subscribers). It fails, naming sys, when nothing was
// delivered.
func fanoutResult(sys string, w window, t totals, want int64) (w1Result, error) {
	if t.n == 0 {
		return w1Result{}, fmt.Errorf("%s: nothing delivered", sys)
	}
	return w1Result{
		nsPerDelivery:     float64(w.ns) / float64(t.n),
		allocsPerDelivery: float64(w.mallocs) / float64(want),
		cpuPerDelivery:    float64(w.cpu) / float64(t.n),
		deliveries:        t.n,
		lost:              want - t.n,
		reordered:         t.reordered,
		skipped:           t.skipped,
		foreign:           t.foreign,
		evicted:           t.ended,
		gaps:              t.gaps,
	}, nil
}

// ---- W5 many sessions ----

func runW5(sys System, M, P int) (w1Result, error) {
	var res w1Result
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return res, err
	}
	per := P / M
	names := make([]string, M)
	sinks := make([]*Sink, M)
	bySess := make(map[string][]*Sink, M)
	for i := range names {
		names[i] = "session-" + strconv.Itoa(i)
		sinks[i] = newSink(int64(per))
		sinks[i].sess = names[i]
		if err := inst.Subscribe(names[i], SubOpts{}, sinks[i]); err != nil {
			inst.Close()
			return res, err
		}
		bySess[names[i]] = sinks[i : i+1]
	}
	if err := inst.Sync(bySess); err != nil {
		inst.Close()
		return res, err
	}
	pubs := make([]func([]byte) (uint64, error), M)
	for i, k := range sinks {
		k.arm(inst.LastID(names[i]))
		if pubs[i], err = inst.Publisher(names[i]); err != nil {
			inst.Close()
			return res, err
		}
	}
	w, err := publishMeasured(pubs, per*M, sinks, quiet)
	inst.Close()
	if err != nil {
		return res, err
	}
	return fanoutResult(sys.Name, w, sumSinks(sinks), int64(per*M))
}

// ---- the floor ----

// floorChanPair is the cost per item of one buffered-channel send and
// receive between two goroutines (capacity 1000; the element is what the
// naive baseline sends: an id and the payload's slice header, 32 bytes).
func floorChanPair(N int) float64 {
	ch := make(chan naiveEvent, naiveChanCap)
	done := make(chan struct{})
	go func() {
		var sum uint64
		for i := 0; i < N; i++ {
			ev := <-ch
			sum += ev.id
		}
		_ = sum
		close(done)
	}()
	t0 := now()
	for i := 0; i < N; i++ {
		ch <- naiveEvent{id: uint64(i), data: payload256}
	}
	<-done
	return float64(now()-t0) / float64(N)
}

// floorCopy256 is the cost of one 256-byte copy.
func floorCopy256() float64 {
	const reps = 5_000_000
	var bufs [8][256]byte
	t0 := now()
	for i := 0; i < reps; i++ {
		copy(bufs[i&7][:], payload256)
	}
	return float64(now()-t0) / reps
}

// subscribeSession subscribes sinks to sess and waits until the system has
// registered them; with arm it arms them after the session's last id. It
// leaves inst open on an error (the caller closes it).
func subscribeSession(inst Instance, sess string, sinks []*Sink, arm bool) error {
	for _, k := range sinks {
		if err := inst.Subscribe(sess, SubOpts{}, k); err != nil {
			return err
		}
	}
	if err := inst.Sync(map[string][]*Sink{sess: sinks}); err != nil {
		return err
	}
	if arm {
		base := inst.LastID(sess)
		for _, k := range sinks {
			k.arm(base)
		}
	}
	return nil
}

// subscribeArmed subscribes every sink to sess, waits until the system has
// registered them all, and arms them to expect the ids after the session's
// last one. On an error it closes inst.
func subscribeArmed(inst Instance, sess string, sinks []*Sink) error {
	if err := subscribeSession(inst, sess, sinks, true); err != nil {
		inst.Close()
		return err
	}
	return nil
}
