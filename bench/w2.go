package main

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

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
