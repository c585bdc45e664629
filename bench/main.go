package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

type params struct {
	runs         int
	w1S          []int
	w1Events     int
	w1Deliveries int
	w2Subs       int
	w2Events     int
	w2Interval   time.Duration
	w3           [][2]int // ring, subscribes per run
	w4Sessions   int
	w5Sessions   int
	w5Publishes  int
	w6Publishes  int
	w7Subs       int
}

func fullParams() params {
	return params{
		runs: 3, w1S: []int{1, 10, 100, 1000}, w1Events: 200_000, w1Deliveries: 4_000_000,
		w2Subs: 100, w2Events: 10_000, w2Interval: 100 * time.Microsecond,
		w3:         [][2]int{{100, 200}, {10_000, 5}},
		w4Sessions: 10_000, w5Sessions: 10_000, w5Publishes: 1_000_000,
		w6Publishes: 500_000, w7Subs: 10_000,
	}
}

func quickParams() params {
	return params{
		runs: 3, w1S: []int{1, 10, 100, 1000}, w1Events: 20_000, w1Deliveries: 100_000,
		w2Subs: 100, w2Events: 2_000, w2Interval: 100 * time.Microsecond,
		w3:         [][2]int{{100, 50}, {10_000, 2}},
		w4Sessions: 300, w5Sessions: 2_000, w5Publishes: 50_000,
		w6Publishes: 30_000, w7Subs: 2_000,
	}
}

func main() {
	if childMain() {
		return
	}
	quick := flag.Bool("quick", false, "small sizes: finishes in under a minute")
	runs := flag.Int("runs", 0, "runs per figure (default 3)")
	only := flag.String("only", "", "comma-separated workloads to run (W1,W1d,W2,W3,W4,W5,W6,W7); default all")
	sysList := flag.String("systems", "", "comma-separated systems (replaybus,go-sse,centrifuge,naive); default all")
	sizes := flag.String("s", "", "W1 subscriber counts, comma-separated (default 1,10,100,1000)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench: ")

	p := fullParams()
	if *quick {
		p = quickParams()
	}
	if *runs > 0 {
		p.runs = *runs
	}
	if *sizes != "" {
		p.w1S = nil
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				log.Fatalf("-s: %v", err)
			}
			p.w1S = append(p.w1S, n)
		}
	}
	want := func(w string) bool {
		if *only == "" {
			return true
		}
		return slices.Contains(strings.Split(*only, ","), w)
	}
	syss := systems
	if *sysList != "" {
		syss = nil
		for _, name := range strings.Split(*sysList, ",") {
			i := slices.IndexFunc(systems, func(s System) bool { return s.Name == name })
			if i < 0 {
				log.Fatalf("unknown system %q", name)
			}
			syss = append(syss, systems[i])
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				log.Fatal(err)
			}
			runtime.GC()
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}()
	}

	cols := []string{}
	for _, s := range syss {
		cols = append(cols, s.Name)
	}
	cols = append(cols, "floor")
	t := newTable(cols)
	start := time.Now()
	b := &bench{p: p, t: t, syss: syss}
	for _, w := range []struct {
		name string
		run  func()
	}{
		{"W1", func() { b.w1(true) }}, {"W1d", func() { b.w1(false) }}, {"W2", b.w2}, {"W3", b.w3},
		{"W4", b.w4}, {"W5", b.w5}, {"W6", b.w6}, {"W7", b.w7},
	} {
		if want(w.name) {
			t0 := time.Now()
			w.run()
			progress("== %s took %.1fs", w.name, time.Since(t0).Seconds())
		}
	}
	fmt.Printf("replaybus benchmarks — %s, GOMAXPROCS=%d, %s, %d runs per figure, mode %s, %.0fs\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), cpuModel(), p.runs, map[bool]string{true: "-quick", false: "full"}[*quick],
		time.Since(start).Seconds())
	t.Print(os.Stdout)
	key := "W1 S=100 lossless"
	rb, ok1 := t.Median(key, "replaybus")
	gs, ok2 := t.Median(key, "go-sse")
	fl, ok3 := t.Median(key, "floor")
	if ok1 {
		line := fmt.Sprintf("\nreplaybus W1 S=100: %.1f ns/delivery", rb)
		if ok2 {
			line += fmt.Sprintf("; ratio to go-sse %.2f (go-sse %.1f ns)", rb/gs, gs)
		}
		if ok3 {
			line += fmt.Sprintf("; ratio to floor %.2f (floor %.1f ns)", rb/fl, fl)
		}
		fmt.Println(line)
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			if i := strings.IndexByte(l, ':'); i >= 0 {
				return strings.TrimSpace(l[i+1:]) + fmt.Sprintf(" (%d CPUs)", runtime.NumCPU())
			}
		}
	}
	return runtime.GOARCH
}

type bench struct {
	p    params
	t    *Table
	syss []System
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

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (b *bench) w1(lossless bool) {
	mode := "lossless"
	if !lossless {
		mode = "default limits"
	}
	for _, S := range b.p.w1S {
		N := min(b.p.w1Events, b.p.w1Deliveries/S)
		key := fmt.Sprintf("W1 S=%d %s", S, mode)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				res, err := runW1(sys, S, N, lossless)
				if err != nil {
					progress("%s %s: %v", key, sys.Name, err)
					b.t.Note(key, "ns/delivery", aggMedian, sys.Name, "error")
					continue
				}
				progress("%s run %d %-10s %8.1f ns/delivery %.3f allocs/delivery lost %d reordered %d evicted %d",
					key, r+1, sys.Name, res.nsPerDelivery, res.allocsPerDelivery, res.lost, res.reordered, res.evicted)
				b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
				b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
				if lossless {
					b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered))
				} else {
					b.t.Add(key+" evicted", "subscribers, median", aggMedian, sys.Name, float64(res.evicted))
					b.t.Add(key+" undelivered", "% of events", aggMedian, sys.Name, 100*float64(res.lost)/float64(int64(N)*int64(S)))
				}
			}
			if lossless {
				fl := floorChanPair(N * S)
				b.t.Add(key, "ns/delivery", aggMedian, "floor", fl)
			}
		}
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
	for _, stalled := range []bool{false, true} {
		name := "none stalled"
		if stalled {
			name = "1 stalled"
		}
		prefix := fmt.Sprintf("W2 S=%d %s", b.p.w2Subs, name)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				if stalled && sys.Name == "go-sse" {
					// A Send that never returns stops Joe: every later
					// Publish blocks for good. Nothing to measure.
					b.t.Note(prefix+" publish p50", "ns", aggMedian, sys.Name, "blocks")
					b.t.Note(prefix+" publish p99", "ns", aggMedian, sys.Name, "blocks")
					b.t.Note(prefix+" publish→receive p50", "ns", aggMedian, sys.Name, "blocks")
					b.t.Note(prefix+" publish→receive p99", "ns", aggMedian, sys.Name, "blocks")
					continue
				}
				res, err := runW2(sys, b.p.w2Subs, b.p.w2Events, b.p.w2Interval, stalled)
				if err != nil {
					progress("%s %s: %v", prefix, sys.Name, err)
					continue
				}
				progress("%s run %d %-10s publish p50 %.0f p99 %.0f ns; receive p50 %.0f p99 %.0f ns; lost %d",
					prefix, r+1, sys.Name, res.pubP50, res.pubP99, res.recvP50, res.recvP99, res.lost)
				b.t.Add(prefix+" publish p50", "ns", aggMedian, sys.Name, res.pubP50)
				b.t.Add(prefix+" publish p99", "ns", aggMedian, sys.Name, res.pubP99)
				b.t.Add(prefix+" publish→receive p50", "ns", aggMedian, sys.Name, res.recvP50)
				b.t.Add(prefix+" publish→receive p99", "ns", aggMedian, sys.Name, res.recvP99)
			}
		}
	}
	none := fmt.Sprintf("W2 S=%d none stalled publish p99", b.p.w2Subs)
	one := fmt.Sprintf("W2 S=%d 1 stalled publish p99", b.p.w2Subs)
	for _, sys := range b.syss {
		n, ok1 := b.t.Median(none, sys.Name)
		s, ok2 := b.t.Median(one, sys.Name)
		if ok1 && ok2 && n > 0 {
			b.t.Add("W2 publish p99, 1 stalled ÷ none stalled", "ratio of medians", aggMedian, sys.Name, s/n)
		}
	}
}

func (b *bench) w3() {
	for _, rk := range b.p.w3 {
		R, K := rk[0], rk[1]
		key := fmt.Sprintf("W3 replay ring=%d", R)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				ns, err := runW3(sys, R, K)
				if err != nil {
					progress("%s %s: %v", key, sys.Name, err)
					b.t.Note(key, "ns/event", aggMedian, sys.Name, "error")
					continue
				}
				progress("%s run %d %-10s %.1f ns/event", key, r+1, sys.Name, ns)
				b.t.Add(key, "ns/event", aggMedian, sys.Name, ns)
			}
			b.t.Add(key, "ns/event", aggMedian, "floor", floorCopy(R))
		}
	}
}

func (b *bench) w4() {
	key := "W4 heap ÷ payload, 100 × 2 KB"
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			ratio, stack, err := inChild("W4", sys.Name, b.p.w4Sessions)
			if err != nil {
				progress("%s %s: %v", key, sys.Name, err)
				continue
			}
			progress("%s run %d %-10s %.3f (stack %.0f B/session)", key, r+1, sys.Name, ratio, stack)
			b.t.Add(key, "ratio", aggMedian, sys.Name, ratio)
			b.t.Add("W4 goroutine stack", "bytes/session", aggMedian, sys.Name, stack)
		}
	}
}

func (b *bench) w5() {
	key := fmt.Sprintf("W5 %d sessions × 1 sub", b.p.w5Sessions)
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			res, err := runW5(sys, b.p.w5Sessions, b.p.w5Publishes)
			if err != nil {
				progress("%s %s: %v", key, sys.Name, err)
				continue
			}
			progress("%s run %d %-10s %.1f ns/delivery %.3f allocs lost %d reordered %d evicted %d",
				key, r+1, sys.Name, res.nsPerDelivery, res.allocsPerDelivery, res.lost, res.reordered, res.evicted)
			b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
			b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
			b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered))
		}
	}
}

func (b *bench) w6() {
	P := runtime.GOMAXPROCS(0)
	k1 := "W6 1 publisher"
	kP := fmt.Sprintf("W6 %d publishers, distinct sessions", P)
	kS := fmt.Sprintf("W6 scaling %d vs 1", P)
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			ns1, nsP, err := runW6(sys, P, b.p.w6Publishes)
			if err != nil {
				progress("W6 %s: %v", sys.Name, err)
				continue
			}
			progress("W6 run %d %-10s 1 publisher %.1f ns/publish, %d publishers %.1f ns/publish (aggregate), ×%.2f",
				r+1, sys.Name, ns1, P, nsP, ns1/nsP)
			b.t.Add(k1, "ns/publish", aggMedian, sys.Name, ns1)
			b.t.Add(kP, "ns/publish (aggregate)", aggMedian, sys.Name, nsP)
			b.t.Add(kS, "× throughput", aggMedian, sys.Name, ns1/nsP)
		}
	}
}

func (b *bench) w7() {
	key := fmt.Sprintf("W7 %d idle subscriptions", b.p.w7Subs)
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			heap, stack, err := inChild("W7", sys.Name, b.p.w7Subs)
			if err != nil {
				progress("%s %s: %v", key, sys.Name, err)
				continue
			}
			progress("%s run %d %-10s heap %.0f B/sub stack %.0f B/sub", key, r+1, sys.Name, heap, stack)
			b.t.Add(key+" heap", "bytes/subscription", aggMedian, sys.Name, heap)
			b.t.Add(key+" stacks", "bytes/subscription", aggMedian, sys.Name, stack)
		}
		heap, stack, err := inChild("W7", "floor", b.p.w7Subs)
		if err != nil {
			progress("%s floor: %v", key, err)
			continue
		}
		b.t.Add(key+" heap", "bytes/subscription", aggMedian, "floor", heap)
		b.t.Add(key+" stacks", "bytes/subscription", aggMedian, "floor", stack)
	}
	// The system's own state: the heap figure less one parked goroutine
	// (its descriptor), which every subscriber here has and which belongs
	// to the application's handler rather than to the system.
	if fl, ok := b.t.Median(key+" heap", "floor"); ok {
		for _, sys := range b.syss {
			if v, ok := b.t.Median(key+" heap", sys.Name); ok {
				b.t.Add(key+" heap less the reader goroutine", "bytes/subscription", aggMedian, sys.Name, v-fl)
			}
		}
	}
	b.t.Add("floor: 256-byte copy", "ns", aggMedian, "floor", floorCopy256())
}
