package main

import (
	"fmt"
	"runtime"
	"sync"
)

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
