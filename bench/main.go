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

// fullParams are the sizes of a full run (docs/benchmarks.md's figures).
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

// quickParams are fullParams with smaller counts: -quick.
func quickParams() params {
	p := fullParams()
	p.w1Events, p.w1Deliveries = 20_000, 100_000
	p.w2Events, p.w2SatEvents = 500, 2_000
	p.w3 = [][2]int{{100, 50}, {10_000, 30}}
	p.w4Sessions, p.w5Sessions, p.w5Publishes = 300, 2_000, 50_000
	p.w6Publishes, p.w6Deliveries, p.w7Subs = 30_000, 60_000, 2_000
	p.w8Events, p.w8Deliveries = 2_000, 100_000
	return p
}

func main() {
	if childMain() {
		return
	}
	quick := flag.Bool("quick", false, "small sizes: finishes in under a minute")
	runs := flag.Int("runs", 0, "runs per figure (default 3)")
	only := flag.String("only", "", "comma-separated workloads to run (W1,W1d,W2,W2s,W3,W4,W5,W6,W7,W8,W8ws); default all")
	sysList := flag.String("systems", "", "comma-separated systems (replaybus,replaybus-next,go-sse,centrifuge,naive,chan); default all but replaybus-next")
	sizes := flag.String("s", "", "W1 and W8 subscriber counts, comma-separated (default 1,10,100,1000)")
	flag.BoolVar(&wsPlain, "ws-plain", false, "W8ws: replaybus's clients do not offer the batched subprotocol (one message per frame, the form every WebSocket client gets)")
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
	syss := slices.DeleteFunc(slices.Clone(systems), func(s System) bool { return s.OptIn })
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
		{"W3", b.w3}, {"W4", b.w4}, {"W5", b.w5}, {"W6", b.w6}, {"W7", b.w7}, {"W8", b.w8}, {"W8ws", b.w8ws},
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
	keys := []string{"W1 S=100 lossless", "W1 S=1000 lossless", "W8 S=100 SSE", "W8 S=1000 SSE"}
	for _, rk := range b.p.w3 {
		if rk[0] >= 10_000 {
			keys = append(keys, w3Key(rk[0], rk[1]))
		}
	}
	for _, key := range keys {
		if m, sp, ok := b.t.Ratio(key, "replaybus", "go-sse"); ok {
			parts = append(parts, fmt.Sprintf("%s %.2f ±%.0f%%", key, m, sp))
		}
		if m, sp, ok := b.t.Ratio(key, "replaybus-next", "go-sse"); ok {
			parts = append(parts, fmt.Sprintf("%s (Next) %.2f ±%.0f%%", key, m, sp))
		}
	}
	line := "replaybus ÷ go-sse per delivery (W3: per replayed event), below 1 is faster (median of per-run ratios ± spread): "
	if len(parts) == 0 {
		line += "not measured"
	} else {
		line += strings.Join(parts, ", ")
	}
	var ws []string
	for _, S := range b.p.w8S {
		key := fmt.Sprintf("W8 S=%d WS", S)
		if m, sp, ok := b.t.Ratio(key, "replaybus", "centrifuge"); ok {
			c, csp, _ := b.t.Ratio(key+" CPU", "replaybus", "centrifuge")
			ws = append(ws, fmt.Sprintf("S=%d %.2f ±%.0f%% (CPU %.2f ±%.0f%%)", S, m, sp, c, csp))
		}
	}
	if len(ws) > 0 {
		line += "; W8 over WebSocket, replaybus ÷ centrifuge: " + strings.Join(ws, ", ")
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

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
