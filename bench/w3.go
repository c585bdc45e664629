package main

import (
	"fmt"
	"runtime"
	"slices"
	"time"
)

// ---- W3 replay ----

// w3Key is the table's row for a ring of R events resumed K times per run.
func w3Key(R, K int) string { return fmt.Sprintf("W3 replay ring=%d (median of %d resumes)", R, K) }

// runW3 resumes K times and returns the median ns per replayed event and
// the median allocations per replayed event (the whole process's, from
// Subscribe to the last replayed event).
func runW3(sys System, R, K int) (nsPerEvent, allocsPerEvent float64, err error) {
	inst, err := sys.Open(Opts{Ring: R, Lossless: true})
	if err != nil {
		return 0, 0, err
	}
	defer inst.Close()
	const sess = "w3"
	pub, err := inst.Publisher(sess)
	if err != nil {
		return 0, 0, err
	}
	for i := 0; i < 3*R; i++ {
		if _, err := pub(payload256); err != nil {
			return 0, 0, err
		}
	}
	last := inst.LastID(sess)
	cursor := last - uint64(R)
	per := make([]float64, 0, K)
	allocs := make([]float64, 0, K)
	var m0, m1 runtime.MemStats
	for j := 0; j < K; j++ {
		k := newSink(int64(R))
		k.sess, k.contig = sess, true
		k.arm(cursor)
		runtime.GC()
		runtime.ReadMemStats(&m0)
		t0 := now()
		if err := inst.Subscribe(sess, SubOpts{Replay: true, Cursor: cursor}, k); err != nil {
			return 0, 0, err
		}
		select {
		case <-k.done:
			runtime.ReadMemStats(&m1)
		case <-time.After(30 * time.Second):
			return 0, 0, fmt.Errorf("%s: replay of %d did not complete (%d arrived)", sys.Name, R, k.progress.Load())
		}
		if k.ended.Load() {
			return 0, 0, fmt.Errorf("%s: replay subscriber ended: %v", sys.Name, k.reason.Load())
		}
		if k.reordered+k.skipped+k.foreign > 0 {
			return 0, 0, fmt.Errorf("%s: replay out of order (%d reordered, %d skipped, %d of another session)",
				sys.Name, k.reordered, k.skipped, k.foreign)
		}
		per = append(per, float64(k.lastAt.Load()-t0)/float64(R))
		allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/float64(R))
	}
	m, _ := medianSpread(per)
	a, _ := medianSpread(allocs)
	return m, a, nil
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
