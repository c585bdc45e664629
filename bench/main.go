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
	w2Events     int           // measured events, after w2Warmup
	w2Interval   time.Duration // the pacing of the W2 rows (1 ms)
	w2SatEvents  int           // the saturation row's events
	w2SatPace    time.Duration // the saturation row's pacing (100 µs)
	w3           [][2]int      // ring, resumes per run (the median is reported)
	w4Sessions   int
	w5Sessions   int
	w5Publishes  int
	w6Publishes  int   // per publisher and phase, with no subscribers
	w6Deliveries int   // cap on deliveries per publisher and phase
	w6Subs       []int // subscribers per session
	w7Subs       int
	w8S          []int
	w8Events     int
	w8Deliveries int
}

func fullParams() params {
	return params{
		runs: 3, w1S: []int{1, 10, 100, 1000}, w1Events: 200_000, w1Deliveries: 4_000_000,
		w2Subs: 100, w2Events: 2_000, w2Interval: time.Millisecond,
		w2SatEvents: 10_000, w2SatPace: 100 * time.Microsecond,
		w3:         [][2]int{{100, 200}, {10_000, 30}},
		w4Sessions: 10_000, w5Sessions: 10_000, w5Publishes: 1_000_000,
		w6Publishes: 200_000, w6Deliveries: 400_000, w6Subs: []int{0, 1, 10}, w7Subs: 10_000,
		w8S: []int{1, 10, 100, 1000}, w8Events: 20_000, w8Deliveries: 400_000,
	}
}

func quickParams() params {
	return params{
		runs: 3, w1S: []int{1, 10, 100, 1000}, w1Events: 20_000, w1Deliveries: 100_000,
		w2Subs: 100, w2Events: 500, w2Interval: time.Millisecond,
		w2SatEvents: 2_000, w2SatPace: 100 * time.Microsecond,
		w3:         [][2]int{{100, 50}, {10_000, 30}},
		w4Sessions: 300, w5Sessions: 2_000, w5Publishes: 50_000,
		w6Publishes: 30_000, w6Deliveries: 60_000, w6Subs: []int{0, 1, 10}, w7Subs: 2_000,
		w8S: []int{1, 10, 100, 1000}, w8Events: 2_000, w8Deliveries: 100_000,
	}
}

func main() {
	if childMain() {
		return
	}
	quick := flag.Bool("quick", false, "small sizes: finishes in under a minute")
	runs := flag.Int("runs", 0, "runs per figure (default 3)")
	only := flag.String("only", "", "comma-separated workloads to run (W1,W1d,W2,W2s,W3,W4,W5,W6,W7,W8); default all")
	sysList := flag.String("systems", "", "comma-separated systems (replaybus,go-sse,centrifuge,naive,chan); default all")
	sizes := flag.String("s", "", "W1 and W8 subscriber counts, comma-separated (default 1,10,100,1000)")
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
		p.w8S = p.w1S
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
	q0 := quietCheck()
	progress("quiet check before: %s", q0)
	b := &bench{p: p, t: t, syss: syss}
	for _, w := range []struct {
		name string
		run  func()
	}{
		{"W1", func() { b.w1(true) }}, {"W1d", func() { b.w1(false) }}, {"W2", b.w2}, {"W2s", b.w2sat},
		{"W3", b.w3}, {"W4", b.w4}, {"W5", b.w5}, {"W6", b.w6}, {"W7", b.w7}, {"W8", b.w8},
	} {
		if want(w.name) {
			t0 := time.Now()
			w.run()
			progress("== %s took %.1fs", w.name, time.Since(t0).Seconds())
		}
	}
	q1 := quietCheck()
	progress("quiet check after: %s", q1)
	verdict := judgeQuiet(q0, q1, time.Since(start))
	fmt.Printf("replaybus benchmarks — %s, GOMAXPROCS=%d, %s, %d runs per figure, mode %s, %.0fs\n",
		runtime.Version(), runtime.GOMAXPROCS(0), cpuModel(), p.runs, map[bool]string{true: "-quick", false: "full"}[*quick],
		time.Since(start).Seconds())
	fmt.Printf("machine: %s\n\n", verdict)
	t.Print(os.Stdout)
	fmt.Println()
	fmt.Println(b.summary(verdict))
}

// summary is the run's last line: replaybus's ratio to go-sse on the
// headline workloads, with its spread over the runs, whether every lossless
// run was lossless, and the machine verdict.
func (b *bench) summary(verdict string) string {
	var parts []string
	for _, key := range []string{"W1 S=100 lossless", "W1 S=1000 lossless", "W8 S=100 SSE", "W8 S=1000 SSE"} {
		if m, sp, ok := b.t.Ratio(key, "replaybus", "go-sse"); ok {
			parts = append(parts, fmt.Sprintf("%s %.2f ±%.0f%%", key, m, sp))
		}
	}
	line := "replaybus ÷ go-sse per delivery, below 1 is faster (median of per-run ratios ± spread): "
	if len(parts) == 0 {
		line += "not measured"
	} else {
		line += strings.Join(parts, ", ")
	}
	switch {
	case b.losslessRuns == 0:
		line += "; lossless: not checked"
	case b.losslessBad == 0:
		line += fmt.Sprintf("; lossless: yes (replaybus: 0 lost, reordered or of another session in %d lossless runs)", b.losslessRuns)
	default:
		line += fmt.Sprintf("; lossless: NO (replaybus: %d lost/reordered/of another session over %d lossless runs)", b.losslessBad, b.losslessRuns)
	}
	return line + "; machine: " + verdict
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

	losslessRuns int   // replaybus runs that must lose nothing
	losslessBad  int64 // what they lost, reordered or misattributed
}

func (b *bench) lossless(sys string, res w1Result) {
	if sys != "replaybus" {
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
	pace := fmt.Sprintf("%v pacing", b.p.w2Interval)
	for _, stalled := range []bool{false, true} {
		name := "none stalled"
		if stalled {
			name = "1 stalled"
		}
		prefix := fmt.Sprintf("W2 S=%d %s %s", b.p.w2Subs, pace, name)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				if stalled && (sys.Name == "go-sse" || sys.Name == "chan") {
					// A Send (or channel send) that never returns stops
					// every later Publish for good. Nothing to measure.
					for _, m := range []string{" publish p50", " publish p99", " publish→receive p50", " publish→receive p99"} {
						b.t.Note(prefix+m, "ns", aggMedian, sys.Name, "blocks")
					}
					continue
				}
				b.w2Run(prefix, r, sys, b.p.w2Events, b.p.w2Interval, stalled)
			}
		}
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
	for r := 0; r < b.p.runs; r++ {
		for _, sys := range b.order(r) {
			b.w2Run(prefix, r, sys, b.p.w2SatEvents, b.p.w2SatPace, false)
		}
	}
}

func (b *bench) w2Run(prefix string, r int, sys System, N int, pace time.Duration, stalled bool) {
	res, err := runW2(sys, b.p.w2Subs, N, pace, stalled)
	if err != nil {
		progress("%s %s: %v", prefix, sys.Name, err)
		return
	}
	progress("%s run %d %-10s publish p50 %.0f p99 %.0f ns; receive p50 %.0f p99 %.0f ns; lost %d",
		prefix, r+1, sys.Name, res.pubP50, res.pubP99, res.recvP50, res.recvP99, res.lost)
	b.t.Add(prefix+" publish p50", "ns", aggMedian, sys.Name, res.pubP50)
	b.t.Add(prefix+" publish p99", "ns", aggMedian, sys.Name, res.pubP99)
	b.t.Add(prefix+" publish→receive p50", "ns", aggMedian, sys.Name, res.recvP50)
	b.t.Add(prefix+" publish→receive p99", "ns", aggMedian, sys.Name, res.recvP99)
}

func (b *bench) w3() {
	for _, rk := range b.p.w3 {
		R, K := rk[0], rk[1]
		key := fmt.Sprintf("W3 replay ring=%d (median of %d resumes)", R, K)
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
	for _, subs := range b.p.w6Subs {
		N := b.p.w6Publishes
		if subs > 0 {
			N = min(N, b.p.w6Deliveries/subs)
		}
		tag := fmt.Sprintf("W6 %d subs/session", subs)
		k1 := tag + ", 1 publisher"
		kP := fmt.Sprintf("%s, %d publishers on distinct trees", tag, P)
		kS := fmt.Sprintf("%s, scaling %d vs 1", tag, P)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				res, err := runW6(sys, P, N, subs)
				if err != nil {
					progress("%s %s: %v", tag, sys.Name, err)
					continue
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
			}
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
				b.t.Add(key+" heap less the reader goroutine and its context", "bytes/subscription", aggMedian, sys.Name, v-fl)
			}
		}
	}
	b.t.Add("floor: 256-byte copy", "ns", aggMedian, "floor", floorCopy256())
}

func (b *bench) w8() {
	for _, S := range b.p.w8S {
		N := min(b.p.w8Events, b.p.w8Deliveries/S)
		key := fmt.Sprintf("W8 S=%d SSE", S)
		for r := 0; r < b.p.runs; r++ {
			for _, sys := range b.order(r) {
				if httpSystems[sys.Name] == nil {
					b.t.Note(key, "ns/delivery", aggMedian, sys.Name, "no SSE handler")
					continue
				}
				res, err := runW8(sys.Name, S, N, true)
				if err != nil {
					progress("%s %s: %v", key, sys.Name, err)
					b.t.Note(key, "ns/delivery", aggMedian, sys.Name, "error")
					continue
				}
				progress("%s run %d %-10s %8.1f ns/delivery cpu %.1f ns/delivery %.3f allocs lost %d reordered %d skipped %d foreign %d",
					key, r+1, sys.Name, res.nsPerDelivery, res.cpuPerDelivery, res.allocsPerDelivery, res.lost, res.reordered, res.skipped, res.foreign)
				b.t.Add(key, "ns/delivery", aggMedian, sys.Name, res.nsPerDelivery)
				b.t.Add(key+" CPU", "CPU ns/delivery", aggMedian, sys.Name, res.cpuPerDelivery)
				b.t.Add(key+" allocs", "allocs/delivery", aggMedian, sys.Name, res.allocsPerDelivery)
				b.t.Add(key+" lost+reordered", "events, worst run", aggMax, sys.Name, float64(res.lost+res.reordered+res.foreign))
				b.lossless(sys.Name, res)
			}
		}
		progress("%s: %d events × %d clients", key, N, S)
	}
}
