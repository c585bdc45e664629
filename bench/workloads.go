package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pubDone := make(chan struct{})
	c0 := cpuNanos()
	t0 := now()
	for i := 0; i < N; i++ {
		if _, err := pub(payload256); err != nil {
			close(pubDone)
			inst.Close()
			return res, err
		}
	}
	close(pubDone)
	tEnd := waitSinks(sinks, pubDone, quiet)
	c1 := cpuNanos()
	runtime.ReadMemStats(&m1)
	inst.Close()
	t := sumSinks(sinks)
	if t.n == 0 {
		return res, fmt.Errorf("%s: nothing delivered", sys.Name)
	}
	res = w1Result{
		nsPerDelivery:     float64(tEnd-t0) / float64(t.n),
		allocsPerDelivery: float64(m1.Mallocs-m0.Mallocs) / float64(int64(N)*int64(S)),
		cpuPerDelivery:    float64(c1-c0) / float64(t.n),
		deliveries:        t.n,
		lost:              int64(N)*int64(S) - t.n,
		reordered:         t.reordered,
		skipped:           t.skipped,
		foreign:           t.foreign,
		evicted:           t.ended,
		gaps:              t.gaps,
	}
	return res, nil
}

// ---- W2 latency ----

type w2Result struct {
	pubP50, pubP99, recvP50, recvP99 float64
	lost                             int64
}

func percentile(v []int64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(p * float64(len(v)-1))
	return float64(v[i])
}

// w2Warmup events are published at the pacing before the measured ones
// and not measured: goroutines are running, queues and buffers are sized.
const w2Warmup = 200

func runW2(sys System, S, N int, interval time.Duration, stalled bool) (w2Result, error) {
	var res w2Result
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return res, err
	}
	const sess = "w2"
	live := S
	if stalled {
		live--
		if err := inst.Subscribe(sess, SubOpts{Stall: true}, newSink(int64(N))); err != nil {
			inst.Close()
			return res, err
		}
	}
	sinks := make([]*Sink, live)
	pubNanos := make([]int64, N)
	for i := range sinks {
		sinks[i] = newSink(int64(N))
		sinks[i].sess, sinks[i].contig = sess, true
		sinks[i].pubNanos = pubNanos
		sinks[i].lat = make([]int64, 0, N)
	}
	// Registered but not armed: the warm-up's ids must not count.
	if err := subscribeSession(inst, sess, sinks, false); err != nil {
		inst.Close()
		return res, err
	}
	pub, err := inst.Publisher(sess)
	if err != nil {
		inst.Close()
		return res, err
	}
	paced := func(n int, each func(i int) error) error {
		t0 := now()
		for i := 0; i < n; i++ {
			if d := t0 + int64(i)*int64(interval) - now(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if err := each(i); err != nil {
				return err
			}
		}
		return nil
	}
	// Warm-up, then arm the sinks after it: its ids are not measured.
	if err := paced(w2Warmup, func(int) error { _, err := pub(payload256); return err }); err != nil {
		inst.Close()
		return res, err
	}
	base := inst.LastID(sess)
	for _, k := range sinks {
		k.arm(base)
	}
	pubLat := make([]int64, N)
	pubDone := make(chan struct{})
	runtime.GC()
	err = paced(N, func(i int) error {
		s := now()
		atomic.StoreInt64(&pubNanos[i], s)
		if _, err := pub(payload256); err != nil {
			return err
		}
		pubLat[i] = now() - s
		return nil
	})
	close(pubDone)
	if err != nil {
		inst.Close()
		return res, err
	}
	waitSinks(sinks, pubDone, quiet)
	inst.Close()
	var lat []int64
	for _, k := range sinks {
		lat = append(lat, k.lat...)
	}
	t := sumSinks(sinks)
	res = w2Result{
		pubP50: percentile(pubLat, 0.50), pubP99: percentile(pubLat, 0.99),
		recvP50: percentile(lat, 0.50), recvP99: percentile(lat, 0.99),
		lost: int64(N)*int64(live) - t.n,
	}
	return res, nil
}

// ---- W3 replay ----

// runW3 resumes K times and returns the median ns per replayed event.
func runW3(sys System, R, K int) (nsPerEvent float64, err error) {
	inst, err := sys.Open(Opts{Ring: R, Lossless: true})
	if err != nil {
		return 0, err
	}
	defer inst.Close()
	const sess = "w3"
	pub, err := inst.Publisher(sess)
	if err != nil {
		return 0, err
	}
	for i := 0; i < 3*R; i++ {
		if _, err := pub(payload256); err != nil {
			return 0, err
		}
	}
	last := inst.LastID(sess)
	cursor := last - uint64(R)
	per := make([]float64, 0, K)
	for j := 0; j < K; j++ {
		k := newSink(int64(R))
		k.sess, k.contig = sess, true
		k.arm(cursor)
		runtime.GC()
		t0 := now()
		if err := inst.Subscribe(sess, SubOpts{Replay: true, Cursor: cursor}, k); err != nil {
			return 0, err
		}
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("%s: replay of %d did not complete (%d arrived)", sys.Name, R, k.progress.Load())
		}
		if k.ended.Load() {
			return 0, fmt.Errorf("%s: replay subscriber ended: %v", sys.Name, k.reason.Load())
		}
		if k.reordered+k.skipped+k.foreign > 0 {
			return 0, fmt.Errorf("%s: replay out of order (%d reordered, %d skipped, %d of another session)",
				sys.Name, k.reordered, k.skipped, k.foreign)
		}
		per = append(per, float64(k.lastAt.Load()-t0)/float64(R))
	}
	m, _ := medianSpread(per)
	return m, nil
}

// floorCopy is the cost per event of copying R 256-byte payloads, held in
// separate allocations as a ring holds them, into one buffer.
func floorCopy(R int) float64 {
	src := make([][]byte, R)
	for i := range src {
		src[i] = slices.Clone(payload256)
	}
	dst := make([]byte, 256*R)
	reps := max(1, 2_000_000/R)
	t0 := now()
	for r := 0; r < reps; r++ {
		off := 0
		for _, s := range src {
			off += copy(dst[off:], s)
		}
	}
	return float64(now()-t0) / float64(reps*R)
}

// ---- W4 memory ----

func runW4(sys System, M int) (ratio, stackPerSession float64, err error) {
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return 0, 0, err
	}
	defer inst.Close()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for s := 0; s < M; s++ {
		sess := "session-" + strconv.Itoa(s)
		for i := 0; i < 100; i++ {
			p := make([]byte, len(payload2K))
			copy(p, payload2K)
			if _, err := inst.Publish(sess, p); err != nil {
				return 0, 0, err
			}
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heap := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(M)
	stack := float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / float64(M)
	return heap / float64(100*len(payload2K)), stack, nil
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
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pubDone := make(chan struct{})
	c0 := cpuNanos()
	t0 := now()
	for i := 0; i < per*M; i++ {
		if _, err := pubs[i%M](payload256); err != nil {
			close(pubDone)
			inst.Close()
			return res, err
		}
	}
	close(pubDone)
	tEnd := waitSinks(sinks, pubDone, quiet)
	c1 := cpuNanos()
	runtime.ReadMemStats(&m1)
	inst.Close()
	t := sumSinks(sinks)
	if t.n == 0 {
		return res, fmt.Errorf("%s: nothing delivered", sys.Name)
	}
	return w1Result{
		nsPerDelivery:     float64(tEnd-t0) / float64(t.n),
		allocsPerDelivery: float64(m1.Mallocs-m0.Mallocs) / float64(per*M),
		cpuPerDelivery:    float64(c1-c0) / float64(t.n),
		deliveries:        t.n, lost: int64(per*M) - t.n, reordered: t.reordered, evicted: t.ended, gaps: t.gaps,
		skipped: t.skipped, foreign: t.foreign,
	}, nil
}

// ---- W6 parallel publishers ----

type w6Result struct {
	ns1, nsP   float64 // wall ns per publish: one publisher; P publishers (aggregate)
	cpu1, cpuP float64 // process CPU ns per publish in each phase
	lost       int64   // deliveries missing (lossless: must be 0)
	bad        int64   // reordered + skipped + foreign
}

// runW6 publishes N events from one publisher to one session, then N from
// each of P publishers, each on its own session (distinct trees: every
// session is a root), with subs draining subscribers per session. A phase
// ends when every subscriber has received its events.
func runW6(sys System, P, N, subs int) (res w6Result, err error) {
	inst, err := sys.Open(Opts{Ring: 100, Lossless: true})
	if err != nil {
		return res, err
	}
	defer inst.Close()
	phase := func(np int) (nsPer, cpuPer float64, err error) {
		// Fresh sessions per phase, each a root of its own tree.
		names := make([]string, np)
		pubs := make([]func([]byte) (uint64, error), np)
		for j := range names {
			names[j] = fmt.Sprintf("w6-%d-%d", np, j)
			if _, err := inst.Publish(names[j], payload256); err != nil {
				return 0, 0, err
			}
			if pubs[j], err = inst.Publisher(names[j]); err != nil {
				return 0, 0, err
			}
		}
		var all []*Sink
		per := make([][]*Sink, np)
		for j := 0; j < np; j++ {
			for i := 0; i < subs; i++ {
				k := newSink(int64(N))
				// replaybus's ids are bus-wide: contiguous per session
				// only while one session publishes.
				k.sess, k.contig = names[j], np == 1
				per[j] = append(per[j], k)
			}
			all = append(all, per[j]...)
			if subs > 0 {
				if err := subscribeSession(inst, names[j], per[j], true); err != nil {
					return 0, 0, err
				}
			}
		}
		var wg, start sync.WaitGroup
		start.Add(1)
		errs := make(chan error, np)
		for j := 0; j < np; j++ {
			wg.Add(1)
			go func(pub func([]byte) (uint64, error)) {
				defer wg.Done()
				start.Wait()
				for i := 0; i < N; i++ {
					if _, err := pub(payload256); err != nil {
						errs <- err
						return
					}
				}
			}(pubs[j])
		}
		runtime.GC()
		c0 := cpuNanos()
		t0 := now()
		start.Done()
		wg.Wait()
		tEnd := now()
		if subs > 0 {
			pubDone := make(chan struct{})
			close(pubDone)
			tEnd = max(tEnd, waitSinks(all, pubDone, quiet))
		}
		c1 := cpuNanos()
		select {
		case err := <-errs:
			return 0, 0, err
		default:
		}
		t := sumSinks(all)
		res.lost += int64(N)*int64(len(all)) - t.n
		res.bad += t.reordered + t.skipped + t.foreign
		return float64(tEnd-t0) / float64(np*N), float64(c1-c0) / float64(np*N), nil
	}
	if res.ns1, res.cpu1, err = phase(1); err != nil {
		return res, err
	}
	if res.nsP, res.cpuP, err = phase(P); err != nil {
		return res, err
	}
	return res, nil
}

// ---- W7 idle subscribers ----

func runW7(sys System, n int) (heapPerSub, stackPerSub float64, err error) {
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return 0, 0, err
	}
	defer inst.Close()
	const sess = "w7"
	if _, err := inst.Publish(sess, payload256); err != nil { // the session exists
		return 0, 0, err
	}
	sinks := make([]*Sink, n)
	for i := range sinks {
		sinks[i] = newSink(1)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for _, k := range sinks {
		if err := inst.Subscribe(sess, SubOpts{}, k); err != nil {
			return 0, 0, err
		}
	}
	if err := inst.Sync(map[string][]*Sink{sess: sinks}); err != nil {
		return 0, 0, err
	}
	time.Sleep(20 * time.Millisecond) // let every reader park
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heapPerSub = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
	stackPerSub = float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / float64(n)
	runtime.KeepAlive(sinks)
	return heapPerSub, stackPerSub, nil
}

// floorParkedGoroutines is what one parked reader goroutine with its own
// context costs (heap: descriptor, closure, context; stack): every system's
// subscriber has one (the HTTP request's), so it is the floor of W7.
func floorParkedGoroutines(n int) (heapPer, stackPer float64) {
	block := make(chan struct{})
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var wg sync.WaitGroup
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	for i := 0; i < n; i++ {
		// What every system's subscriber has: the request's goroutine,
		// parked, and the request's own context.
		ctx, cancel := context.WithCancel(parent)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			select {
			case <-block:
			case <-ctx.Done():
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	close(block)
	wg.Wait()
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n),
		float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / float64(n)
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
	for _, k := range sinks {
		if err := inst.Subscribe(sess, SubOpts{}, k); err != nil {
			inst.Close()
			return err
		}
	}
	if err := inst.Sync(map[string][]*Sink{sess: sinks}); err != nil {
		inst.Close()
		return err
	}
	base := inst.LastID(sess)
	for _, k := range sinks {
		k.arm(base)
	}
	return nil
}
