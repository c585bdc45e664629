package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	goTool, args := "go", os.Args[1:]
	if len(args) >= 2 && args[0] == "-go" {
		goTool, args = args[1], args[2:]
	}
	os.Exit(run(goTool, args, os.Stdout, os.Stderr))
}

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

// skip is one skipped test and its reason.
type skip struct {
	pkg, test, reason string
}

func run(goTool string, args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(goTool, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testsummary:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testsummary:", err)
		return 1
	}
	s := newSummary(stdout)
	s.read(out)
	err = cmd.Wait()
	s.printSkips()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "testsummary:", err)
		return 1
	case s.failed:
		return 1
	}
	return 0
}

// summary turns go test -json back into go test's plain output and collects
// the skipped tests.
type summary struct {
	w      io.Writer
	buf    map[string][]string // package + "\x00" + test → its output lines so far
	skips  []skip
	failed bool
	// passed and failedTests count test results (subtests and examples
	// included, as go test -json reports them) for the closing line.
	passed, failedTests int
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, buf: make(map[string][]string)}
}

func (s *summary) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			fmt.Fprintf(s.w, "%s\n", line) // not JSON: pass it on
			continue
		}
		s.handle(ev)
	}
}

func (s *summary) handle(ev event) {
	key := ev.Package + "\x00" + ev.Test
	switch ev.Action {
	case "build-output":
		fmt.Fprint(s.w, ev.Output)
	case "build-fail":
		s.failed = true
	case "output":
		if ev.Test == "" {
			// Package lines: ok, FAIL, panics, coverage. A plain go test
			// prints no PASS line and no test framing.
			if ev.Output != "PASS\n" && !framing(ev.Output) {
				fmt.Fprint(s.w, ev.Output)
			}
			return
		}
		s.buf[key] = append(s.buf[key], ev.Output)
	case "fail":
		if ev.Test == "" {
			s.failed = true
			s.unfinished(ev.Package)
			return
		}
		s.failedTests++
		for _, l := range s.buf[key] {
			if !framing(l) {
				fmt.Fprint(s.w, l)
			}
		}
		delete(s.buf, key)
	case "skip":
		if ev.Test != "" {
			s.skips = append(s.skips, skip{pkg: ev.Package, test: ev.Test, reason: reason(s.buf[key])})
		}
		delete(s.buf, key)
	case "pass":
		if ev.Test != "" {
			s.passed++
		}
		delete(s.buf, key)
	}
}

// unfinished prints the output of pkg's tests that never ended: a package
// that failed without a failing test (a -timeout panic, a crash, os.Exit)
// printed its reason into the output of whichever test was running, and
// that test has no pass or fail event to print it by. Each counts as failed.
func (s *summary) unfinished(pkg string) {
	var keys []string
	for k := range s.buf {
		if strings.HasPrefix(k, pkg+"\x00") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.failedTests++
		fmt.Fprintf(s.w, "--- UNFINISHED: %s (still running when %s failed)\n", strings.TrimPrefix(k, pkg+"\x00"), pkg)
		for _, l := range s.buf[k] {
			if !framing(l) {
				fmt.Fprint(s.w, l)
			}
		}
		delete(s.buf, k)
	}
}

// framing reports whether l is one of go test -v's framing lines, which a
// plain go test does not print.
func framing(l string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimLeft(l, " "), p) {
			return true
		}
	}
	return false
}

// reason is a skipped test's message: its output without the framing, on
// one line, without the file:line prefix.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		if framing(l) {
			continue
		}
		l = strings.TrimSpace(l)
		if i := strings.Index(l, ": "); i > 0 && strings.Contains(l[:i], ".go:") {
			l = l[i+2:]
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

// printSkips lists the skipped tests, grouped by reason, then closes with
// one count line, "tests: N passed, N failed, N skipped".
func (s *summary) printSkips() {
	defer func() {
		fmt.Fprintf(s.w, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failedTests, len(s.skips))
	}()
	if len(s.skips) == 0 {
		return
	}
	byReason := map[string][]string{}
	for _, k := range s.skips {
		byReason[k.reason] = append(byReason[k.reason], strings.TrimPrefix(k.pkg, "github.com/replaybus/replaybus/")+"."+k.test)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	fmt.Fprintf(s.w, "skipped: %d tests (a plain go test does not show them)\n", len(s.skips))
	for _, r := range reasons {
		tests := byReason[r]
		sort.Strings(tests)
		fmt.Fprintf(s.w, "  %s\n    %s\n", r, strings.Join(tests, "\n    "))
	}
}
