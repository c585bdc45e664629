package main

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Memory workloads: W4 and W7 (each run in a child process, see child.go).

// memStart collects garbage and returns the memory statistics a
// measurement starts from.
func memStart() (m0 runtime.MemStats) {
	runtime.GC()
	runtime.ReadMemStats(&m0)
	return m0
}

// memPer is the growth of the heap and of goroutine stacks since m0, per
// item of n, read after two collections.
func memPer(m0 *runtime.MemStats, n int) (heap, stack float64) {
	var m1 runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n),
		float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / float64(n)
}

// ---- W4 memory ----

func runW4(sys System, M int) (ratio, stackPerSession float64, err error) {
	inst, err := sys.Open(Opts{Ring: 100})
	if err != nil {
		return 0, 0, err
	}
	defer inst.Close()
	m0 := memStart()
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
	heap, stack := memPer(&m0, M)
	return heap / float64(100*len(payload2K)), stack, nil
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
	m0 := memStart()
	for _, k := range sinks {
		if err := inst.Subscribe(sess, SubOpts{}, k); err != nil {
			return 0, 0, err
		}
	}
	if err := inst.Sync(map[string][]*Sink{sess: sinks}); err != nil {
		return 0, 0, err
	}
	time.Sleep(20 * time.Millisecond) // let every reader park
	heapPerSub, stackPerSub = memPer(&m0, n)
	runtime.KeepAlive(sinks)
	return heapPerSub, stackPerSub, nil
}

// floorParkedGoroutines is what one parked reader goroutine with its own
// context costs (heap: descriptor, closure, context; stack): every system's
// subscriber has one (the HTTP request's), so it is the floor of W7.
func floorParkedGoroutines(n int) (heapPer, stackPer float64) {
	block := make(chan struct{})
	m0 := memStart()
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
	heapPer, stackPer = memPer(&m0, n)
	close(block)
	wg.Wait()
	return heapPer, stackPer
}
