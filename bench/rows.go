package main

import (
	"fmt"
	"runtime"
	"time"
)

// bench runs each workload over the systems and fills the table, a row per
// figure.
type bench struct {
	p    params
	t    *Table
	syss []System

	losslessRuns int   // replaybus runs that must lose nothing
	losslessBad  int64 // what they lost, reordered or misattributed
}

func (b *bench) lossless(sys string, res w1Result) {
	if sys != "replaybus" && sys != "replaybus-next" {
		return
	}
	b.losslessRuns++
	b.losslessBad += res.lost + res.reordered + res.foreign
}

// order returns the systems rotated by run, so that no system always runs
// first or last.
func (b *bench) order(run int) []System {
	n := len(b.syss)
	out := make([]System, n)
	for i := range out {
		out[i] = b.syss[(i+run)%n]
	}
	return out
}

// eachRun calls f for every run and, within it, for every system in
// b.order(run), then after (when not nil) with the run. An error f returns
// is logged as "<label> <system>: <error>": that figure is left out.
func (b *bench) eachRun(label string, f func(run int, sys System) error, after func(run int)) {
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			if err := f(r, sys); err != nil {
				progress("%s %s: %v", label, sys.Name, err)
			}
		}
		if after != nil {
			after(r)
		}
	}
}

func (b *bench) w1(lossless bool) {
	mode := "lossless"
	if !lossless {
		mode = "default limits"
	}
	for _, S := range b.p.w1S {
		N := min(b.p.w1Events, b.p.w1Deliveries/S)
		key := fmt.Sprintf("W1 S=%d %s", S, mode)
		b.eachRun(key, func(r int, sys System) error {
			res, err := runW1(sys, S, N, lossless)
			if err != nil {
				b.t.Note(key, "ns/delivery", aggMedian, sys.Name, "error")
				return err
			}
			progress("%s run %d %-10s %8.1f ns/delivery %.3f allocs/delivery cpu %.1f ns lost %d reordered %d skipped %d foreign %d evicted %d",
				key, r+1, sys.Name, res.nsPerDelivery, res.allocsPerDelivery, res.cpuPerDelivery, res.lost, res.reordered, res.skipped, res.foreign, res.evicted)
			b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
			b.t.Add(key+" CPU", "CPU ns/delivery", aggMedian, sys.Name, res.cpuPerDelivery)
			b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
			if lossless {
				// lost counts every id that did not arrive (skipped
				// ones included); foreign ones came from another session.
				b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered+res.foreign))
				b.lossless(sys.Name, res)
			} else {
				b.t.Add(key+" evicted", "subscribers, median", aggMedian, sys.Name, float64(res.evicted))
				b.t.Add(key+" undelivered", "% of events", aggMedian, sys.Name, 100*float64(res.lost)/float64(int64(N)*int64(S)))
			}
			return nil
		}, func(int) {
			if lossless {
				fl := floorChanPair(N * S)
				b.t.Add(key, "ns/delivery", aggMedian, "floor", fl)
			}
		})
		if !lossless {
			for _, sys := range b.syss {
				if sys.Name == "naive" {
					b.t.Note(key+" evicted", "subscribers, median", aggMedian, "naive", "never (drops silently)")
				}
			}
		}
		progress("%s: %d events × %d subscribers", key, N, S)
	}
}

func (b *bench) w2() {
	pace := fmt.Sprintf("%v pacing", b.p.w2Interval)
	for _, stalled := range []bool{false, true} {
		name := "none stalled"
		if stalled {
			name = "1 stalled"
		}
		prefix := fmt.Sprintf("W2 S=%d %s %s", b.p.w2Subs, pace, name)
		b.eachRun(prefix, func(r int, sys System) error {
			if stalled && (sys.Name == "go-sse" || sys.Name == "chan") {
				// A Send (or channel send) that never returns stops
				// every later Publish for good. Nothing to measure.
				for _, m := range []string{" publish p50", " publish p99", " publish→receive p50", " publish→receive p99"} {
					b.t.Note(prefix+m, "ns", aggMedian, sys.Name, "blocks")
				}
				return nil
			}
			return b.w2Run(prefix, r, sys, b.p.w2Events, b.p.w2Interval, stalled)
		}, nil)
	}
	none := fmt.Sprintf("W2 S=%d %s none stalled publish p99", b.p.w2Subs, pace)
	one := fmt.Sprintf("W2 S=%d %s 1 stalled publish p99", b.p.w2Subs, pace)
	for _, sys := range b.syss {
		n, ok1 := b.t.Median(none, sys.Name)
		s, ok2 := b.t.Median(one, sys.Name)
		if ok1 && ok2 && n > 0 {
			b.t.Add("W2 "+pace+" publish p99, 1 stalled ÷ none stalled", "ratio of medians", aggMedian, sys.Name, s/n)
		}
	}
}

// w2sat is the saturation row: one publish per 100 µs saturates the
// designs with a goroutine per subscriber on 2 cores, so its percentiles
// measure the backlog, not a delivery.
func (b *bench) w2sat() {
	prefix := fmt.Sprintf("W2 S=%d %v pacing (saturation) none stalled", b.p.w2Subs, b.p.w2SatPace)
	b.eachRun(prefix, func(r int, sys System) error {
		return b.w2Run(prefix, r, sys, b.p.w2SatEvents, b.p.w2SatPace, false)
	}, nil)
}

// w2Run measures one W2 run of sys and adds its percentiles under prefix.
func (b *bench) w2Run(prefix string, r int, sys System, N int, pace time.Duration, stalled bool) error {
	res, err := runW2(sys, b.p.w2Subs, N, pace, stalled)
	if err != nil {
		return err
	}
	progress("%s run %d %-10s publish p50 %.0f p99 %.0f ns; receive p50 %.0f p99 %.0f ns; lost %d",
		prefix, r+1, sys.Name, res.pubP50, res.pubP99, res.recvP50, res.recvP99, res.lost)
	b.t.Add(prefix+" publish p50", "ns", aggMedian, sys.Name, res.pubP50)
	b.t.Add(prefix+" publish p99", "ns", aggMedian, sys.Name, res.pubP99)
	b.t.Add(prefix+" publish→receive p50", "ns", aggMedian, sys.Name, res.recvP50)
	b.t.Add(prefix+" publish→receive p99", "ns", aggMedian, sys.Name, res.recvP99)
	return nil
}

func (b *bench) w3() {
	for _, rk := range b.p.w3 {
		R, K := rk[0], rk[1]
		key := w3Key(R, K)
		b.eachRun(key, func(r int, sys System) error {
			ns, allocs, err := runW3(sys, R, K)
			if err != nil {
				b.t.Note(key, "ns/event", aggMedian, sys.Name, "error")
				return err
			}
			progress("%s run %d %-10s %.1f ns/event %.4f allocs/event", key, r+1, sys.Name, ns, allocs)
			b.t.Add(key, "ns/event", aggMedian, sys.Name, ns)
			b.t.Add(key+" allocs", "allocs/event", aggMedian, sys.Name, allocs)
			return nil
		}, func(int) {
			b.t.Add(key, "ns/event", aggMedian, "floor", floorCopy(R))
		})
	}
}

func (b *bench) w4() {
	key := "W4 heap ÷ payload, 100 × 2 KB"
	b.eachRun(key, func(r int, sys System) error {
		ratio, stack, err := inChild("W4", sys.Name, b.p.w4Sessions)
		if err != nil {
			return err
		}
		progress("%s run %d %-10s %.3f (stack %.0f B/session)", key, r+1, sys.Name, ratio, stack)
		b.t.Add(key, "ratio", aggMedian, sys.Name, ratio)
		b.t.Add("W4 goroutine stack", "bytes/session", aggMedian, sys.Name, stack)
		return nil
	}, nil)
}

func (b *bench) w5() {
	key := fmt.Sprintf("W5 %d sessions × 1 sub", b.p.w5Sessions)
	b.eachRun(key, func(r int, sys System) error {
		res, err := runW5(sys, b.p.w5Sessions, b.p.w5Publishes)
		if err != nil {
			return err
		}
		progress("%s run %d %-10s %.1f ns/delivery %.3f allocs lost %d reordered %d evicted %d",
			key, r+1, sys.Name, res.nsPerDelivery, res.allocsPerDelivery, res.lost, res.reordered, res.evicted)
		b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
		b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
		b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered))
		return nil
	}, nil)
}

func (b *bench) w6() {
	P := runtime.GOMAXPROCS(0)
	for _, subs := range b.p.w6Subs {
		N := b.p.w6Publishes
		if subs > 0 {
			N = min(N, b.p.w6Deliveries/subs)
		}
		tag := fmt.Sprintf("W6 %d subs/session", subs)
		k1 := tag + ", 1 publisher"
		kP := fmt.Sprintf("%s, %d publishers on distinct trees", tag, P)
		kS := fmt.Sprintf("%s, scaling %d vs 1", tag, P)
		b.eachRun(tag, func(r int, sys System) error {
			res, err := runW6(sys, P, N, subs)
			if err != nil {
				return err
			}
			progress("%s run %d %-10s 1 publisher %.1f ns/publish (cpu %.1f), %d publishers %.1f ns/publish (cpu %.1f), ×%.2f lost %d bad %d",
				tag, r+1, sys.Name, res.ns1, res.cpu1, P, res.nsP, res.cpuP, res.ns1/res.nsP, res.lost, res.bad)
			b.t.Add(k1, "ns/publish", aggMedian, sys.Name, res.ns1)
			b.t.Add(kP, "ns/publish (aggregate)", aggMedian, sys.Name, res.nsP)
			b.t.Add(kS, "× throughput", aggMedian, sys.Name, res.ns1/res.nsP)
			b.t.Add(kP+" CPU", "CPU ns/publish", aggMedian, sys.Name, res.cpuP)
			if subs > 0 && sys.Name != "naive" {
				b.t.Add(tag+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.bad))
				if sys.Name == "replaybus" {
					b.losslessRuns++
					b.losslessBad += res.lost + res.bad
				}
			}
			return nil
		}, nil)
	}
}

func (b *bench) w7() {
	key := fmt.Sprintf("W7 %d idle subscriptions", b.p.w7Subs)
	b.eachRun(key, func(r int, sys System) error {
		heap, stack, err := inChild("W7", sys.Name, b.p.w7Subs)
		if err != nil {
			return err
		}
		progress("%s run %d %-10s heap %.0f B/sub stack %.0f B/sub", key, r+1, sys.Name, heap, stack)
		b.t.Add(key+" heap", "bytes/subscription", aggMedian, sys.Name, heap)
		b.t.Add(key+" stacks", "bytes/subscription", aggMedian, sys.Name, stack)
		return nil
	}, func(int) {
		heap, stack, err := inChild("W7", "floor", b.p.w7Subs)
		if err != nil {
			progress("%s floor: %v", key, err)
			return
		}
		b.t.Add(key+" heap", "bytes/subscription", aggMedian, "floor", heap)
		b.t.Add(key+" stacks", "bytes/subscription", aggMedian, "floor", stack)
	})
	// The system's own state: the heap figure less one parked goroutine
	// (its descriptor), which every subscriber here has and which belongs
	// to the application's handler rather than to the system.
	if fl, ok := b.t.Median(key+" heap", "floor"); ok {
		for _, sys := range b.syss {
			if v, ok := b.t.Median(key+" heap", sys.Name); ok {
				b.t.Add(key+" heap less the reader goroutine and its context", "bytes/subscription", aggMedian, sys.Name, v-fl)
			}
		}
	}
	b.t.Add("floor: 256-byte copy", "ns", aggMedian, "floor", floorCopy256())
}

// w8 is W8 over SSE: each system's own HTTP handler (see w8.go).
func (b *bench) w8() {
	b.loopback("SSE", "no SSE handler", func(name string) bool { return httpSystems[name] != nil },
		func(name string, S, N int) (w1Result, error) { return runW8(name, S, N, true) })
}

// w8ws is W8 over WebSocket: each system's own WebSocket handler, S
// coder/websocket clients, lossless (see w8ws.go).
func (b *bench) w8ws() {
	b.loopback("WS", "no WebSocket handler", func(name string) bool { return wsSystems[name] != nil }, runW8WS)
}

// loopback fills the rows "W8 S=<S> <wire>" of a lossless loopback run at
// every W8 size: run measures a system that has the wire (has), the others
// get the note missing.
func (b *bench) loopback(wire, missing string, has func(name string) bool, run func(name string, S, N int) (w1Result, error)) {
	for _, S := range b.p.w8S {
		N := min(b.p.w8Events, b.p.w8Deliveries/S)
		key := fmt.Sprintf("W8 S=%d %s", S, wire)
		b.eachRun(key, func(r int, sys System) error {
			if !has(sys.Name) {
				b.t.Note(key, "ns/delivery", aggMedian, sys.Name, missing)
				return nil
			}
			res, err := run(sys.Name, S, N)
			if err != nil {
				b.t.Note(key, "ns/delivery", aggMedian, sys.Name, "error")
				return err
			}
			progress("%s run %d %-10s %8.1f ns/delivery cpu %.1f ns/delivery %.3f allocs lost %d reordered %d skipped %d foreign %d",
				key, r+1, sys.Name, res.nsPerDelivery, res.cpuPerDelivery, res.allocsPerDelivery, res.lost, res.reordered, res.skipped, res.foreign)
			b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
			b.t.Add(key+" CPU", "CPU ns/delivery", aggMedian, sys.Name, res.cpuPerDelivery)
			b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
			b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered+res.foreign))
			b.lossless(sys.Name, res)
			return nil
		}, nil)
		progress("%s: %d events × %d clients", key, N, S)
	}
}
