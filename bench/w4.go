package main

import (
	"runtime"
	"strconv"
)

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
