package main

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

func sumSinks(sinks []*Sink) (n, reordered, gaps int64, ended int) {
	for _, k := range sinks {
		n += k.n
		reordered += k.reordered
		gaps += k.gaps.Load()
		if k.ended.Load() {
			ended++
		}
	}
	return
}

// quiet is how long nothing may arrive, after the last publish, before the
// events still missing count as lost.
const quiet = 150 * time.Millisecond

// ---- W1 fan-out ----

type w1Result struct {
	nsPerDelivery     float64
	allocsPerDelivery float64 // process-wide mallocs ÷ (events × subscribers), delivered or not
	deliveries        int64
	lost, reordered   int64
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
	}
	if err := subscribeArmed(inst, sess, sinks); err != nil {
		return res, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pubDone := make(chan struct{})
	t0 := now()
	for i := 0; i < N; i++ {
		if _, err := inst.Publish(sess, payload256); err != nil {
			close(pubDone)
			inst.Close()
			return res, err
		}
	}
	close(pubDone)
	tEnd := waitSinks(sinks, pubDone, quiet)
	runtime.ReadMemStats(&m1)
	evicted := 0
	for _, k := range sinks {
		if k.ended.Load() {
			evicted++
		}
	}
	inst.Close()
	n, reord, gaps, _ := sumSinks(sinks)
	if n == 0 {
		return res, fmt.Errorf("%s: nothing delivered", sys.Name)
	}
	res = w1Result{
		nsPerDelivery:     float64(tEnd-t0) / float64(n),
		allocsPerDelivery: float64(m1.Mallocs-m0.Mallocs) / float64(int64(N)*int64(S)),
		deliveries:        n,
		lost:              int64(N)*int64(S) - n,
		reordered:         reord,
		evicted:           evicted,
		gaps:              gaps,
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
		sinks[i].pubNanos = pubNanos
		sinks[i].lat = make([]int64, 0, N)
	}
	if err := subscribeArmed(inst, sess, sinks); err != nil {
		return res, err
	}
	pubLat := make([]int64, N)
	pubDone := make(chan struct{})
	t0 := now()
	for i := 0; i < N; i++ {
		if d := t0 + int64(i)*int64(interval) - now(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		s := now()
		atomic.StoreInt64(&pubNanos[i], s)
		if _, err := inst.Publish(sess, payload256); err != nil {
			close(pubDone)
			inst.Close()
			return res, err
		}
		pubLat[i] = now() - s
	}
	close(pubDone)
	waitSinks(sinks, pubDone, quiet)
	inst.Close()
	var lat []int64
	for _, k := range sinks {
		lat = append(lat, k.lat...)
	}
	n, _, _, _ := sumSinks(sinks)
	res = w2Result{
		pubP50: percentile(pubLat, 0.50), pubP99: percentile(pubLat, 0.99),
		recvP50: percentile(lat, 0.50), recvP99: percentile(lat, 0.99),
		lost: int64(N)*int64(live) - n,
	}
	return res, nil
}

// ---- W3 replay ----

func runW3(sys System, R, K int) (nsPerEvent float64, err error) {
	inst, err := sys.Open(Opts{Ring: R, Lossless: true})
	if err != nil {
		return 0, err
	}
	defer inst.Close()
	const sess = "w3"
	for i := 0; i < 3*R; i++ {
		if _, err := inst.Publish(sess, payload256); err != nil {
			return 0, err
		}
	}
	last := inst.LastID(sess)
	cursor := last - uint64(R)
	var total int64
	for j := 0; j < K; j++ {
		k := newSink(int64(R))
		k.arm(cursor)
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
		total += k.lastAt.Load() - t0
	}
	return float64(total) / float64(K*R), nil
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
	for i, k := range sinks {
		k.arm(inst.LastID(names[i]))
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pubDone := make(chan struct{})
	t0 := now()
	for i := 0; i < per*M; i++ {
		if _, err := inst.Publish(names[i%M], payload256); err != nil {
			close(pubDone)
			inst.Close()
			return res, err
		}
	}
	close(pubDone)
	tEnd := waitSinks(sinks, pubDone, quiet)
	runtime.ReadMemStats(&m1)
	inst.Close()
	n, reord, gaps, ended := sumSinks(sinks)
	if n == 0 {
		return res, fmt.Errorf("%s: nothing delivered", sys.Name)
	}
	return w1Result{
		nsPerDelivery:     float64(tEnd-t0) / float64(n),
		allocsPerDelivery: float64(m1.Mallocs-m0.Mallocs) / float64(per*M),
		deliveries:        n, lost: int64(per*M) - n, reordered: reord, evicted: ended, gaps: gaps,
	}, nil
}

// ---- W6 parallel publishers ----

func runW6(sys System, P, N int) (ns1, nsP float64, err error) {
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return 0, 0, err
	}
	defer inst.Close()
	names := make([]string, P)
	for i := range names {
		names[i] = "pub-" + strconv.Itoa(i)
		if _, err := inst.Publish(names[i], payload256); err != nil {
			return 0, 0, err
		}
	}
	t0 := now()
	for i := 0; i < N; i++ {
		if _, err := inst.Publish(names[0], payload256); err != nil {
			return 0, 0, err
		}
	}
	ns1 = float64(now()-t0) / float64(N)
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	errs := make(chan error, P)
	for j := 0; j < P; j++ {
		wg.Add(1)
		go func(sess string) {
			defer wg.Done()
			start.Wait()
			for i := 0; i < N; i++ {
				if _, err := inst.Publish(sess, payload256); err != nil {
					errs <- err
					return
				}
			}
		}(names[j])
	}
	t0 = now()
	start.Done()
	wg.Wait()
	nsP = float64(now()-t0) / float64(P*N)
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	return ns1, nsP, nil
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

// floorParkedGoroutines is what one parked reader goroutine costs (heap:
// its descriptor and closure; stack): every system's subscriber has one
// (the SSE handler's), so it is the floor of W7.
func floorParkedGoroutines(n int) (heapPer, stackPer float64) {
	block := make(chan struct{})
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-block
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
