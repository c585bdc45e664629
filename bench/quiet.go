package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The quiet-machine check. Figures measured while other programs compete
// for the CPUs are slower and noisier, by an amount nobody can subtract, so
// the run says whether that happened: load average, a fixed calibration
// loop timed before and after (its slowdown), and — the direct measure —
// the CPU time the whole machine spent during the run less this process's
// own (from /proc/stat and getrusage).

type quietSample struct {
	at       time.Time
	load1    float64 // 1-minute load average
	calib    float64 // ns per iteration of the calibration loop
	busy     int64   // machine-wide busy CPU time, ns (/proc/stat; -1 when unknown)
	selfCPU  int64   // this process's CPU time, ns
	loadText string
}

func (q quietSample) String() string {
	return fmt.Sprintf("load %s, calibration %.2f ns/iteration", q.loadText, q.calib)
}

//lint:ignore U1000 written, never read: keeps the calibration loop from being optimized away
var calibSink uint64

// calibrate times a fixed, cache-resident integer loop (the best of five).
func calibrate() float64 {
	best := 0.0
	for rep := 0; rep < 5; rep++ {
		const n = 20_000_000
		x := uint64(88172645463325252)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		calibSink += x
		v := float64(time.Since(t0).Nanoseconds()) / n
		if best == 0 || v < best {
			best = v
		}
	}
	return best
}

func quietCheck() quietSample {
	q := quietSample{at: time.Now(), busy: machineBusy(), selfCPU: cpuNanos()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			q.loadText = strings.Join(f[:3], " ")
			q.load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	q.calib = calibrate()
	return q
}

// machineBusy returns the CPU time all processes spent so far (user, nice,
// system, irq, softirq, steal), in ns, or -1.
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		if i < len(f) {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return ticks * int64(time.Second) / 100 // USER_HZ is 100 on Linux
}

// judgeQuiet says whether the run was contaminated by other load: other
// processes used more than 10 % of the machine's CPU time during the run,
// the load average before the run exceeded 0.5, or the calibration loop
// was more than 10 % slower after the run than before (or the reverse).
func judgeQuiet(before, after quietSample, wall time.Duration) string {
	var why []string
	others := -1.0
	if before.busy >= 0 && after.busy >= 0 {
		capacity := float64(wall.Nanoseconds()) * float64(runtime.NumCPU())
		o := float64((after.busy-before.busy)-(after.selfCPU-before.selfCPU)) / capacity
		others = max(o, 0)
		if others > 0.10 {
			why = append(why, fmt.Sprintf("other processes used %.0f%% of the CPUs", 100*others))
		}
	}
	if before.load1 > 0.5 {
		why = append(why, fmt.Sprintf("load average %.2f at the start", before.load1))
	}
	drift := after.calib/before.calib - 1
	if drift > 0.10 || drift < -0.10 {
		why = append(why, fmt.Sprintf("calibration loop %+.0f%% after vs before", 100*drift))
	}
	detail := fmt.Sprintf("before: %s; after: %s", before, after)
	if others >= 0 {
		detail += fmt.Sprintf("; other processes' share of the CPUs during the run %.0f%%", 100*others)
	}
	if len(why) == 0 {
		return "quiet (" + detail + ")"
	}
	return "CONTAMINATED — " + strings.Join(why, "; ") + " (" + detail + ")"
}
