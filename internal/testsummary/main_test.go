package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 18.12: make test hid the skipped real-client tests. The summary
// prints what a plain go test prints (ok and FAIL lines, a failing test's
// output), then every skipped test with its reason, and closes with the
// counts.
func TestSummaryKeepsPlainOutputAndListsSkips(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"m/a"}`,
		`{"Action":"run","Package":"m/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"    a_test.go:9: chatty log of a passing test\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestOK"}`,
		`{"Action":"run","Package":"m/a","Test":"TestNode"}`,
		`{"Action":"output","Package":"m/a","Test":"TestNode","Output":"=== RUN   TestNode\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestNode","Output":"    node_test.go:12: node not installed (run make e2e-deps)\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestNode","Output":"--- SKIP: TestNode (0.00s)\n"}`,
		`{"Action":"skip","Package":"m/a","Test":"TestNode"}`,
		`{"Action":"output","Package":"m/a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.01s\n"}`,
		`{"Action":"pass","Package":"m/a"}`,
		`{"Action":"run","Package":"m/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"    b_test.go:5: want 1, got 2\n"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"m/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"m/b","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t0.02s\n"}`,
		`{"Action":"fail","Package":"m/b"}`,
	}, "\n")
	var out bytes.Buffer
	s := newSummary(&out)
	s.read(strings.NewReader(in))
	s.printSkips()
	assert.True(t, s.failed)
	assert.Equal(t, "ok  \tm/a\t0.01s\n"+
		"    b_test.go:5: want 1, got 2\n--- FAIL: TestBad (0.00s)\nFAIL\nFAIL\tm/b\t0.02s\n"+
		"skipped: 1 tests (a plain go test does not show them)\n"+
		"  node not installed (run make e2e-deps)\n    m/a.TestNode\n"+
		"tests: 1 passed, 1 failed, 1 skipped\n", out.String())
}

// make test once ended "FAIL e2e 600.906s" and "0 failed" with nothing
// else: the -timeout panic went into the output of the test that was
// running, which never ended. A package that fails with unfinished tests
// prints their output and counts them.
func TestSummaryPrintsTestsStillRunningWhenThePackageFailed(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"m/c","Test":"TestSlow"}`,
		`{"Action":"output","Package":"m/c","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}`,
		`{"Action":"output","Package":"m/c","Test":"TestSlow","Output":"panic: test timed out after 10m0s\n"}`,
		`{"Action":"output","Package":"m/c","Test":"TestSlow","Output":"\trunning tests:\n\t\tTestSlow (10m0s)\n"}`,
		`{"Action":"output","Package":"m/c","Output":"FAIL\tm/c\t600.906s\n"}`,
		`{"Action":"fail","Package":"m/c"}`,
	}, "\n")
	var out bytes.Buffer
	s := newSummary(&out)
	s.read(strings.NewReader(in))
	s.printSkips()
	assert.True(t, s.failed)
	assert.Equal(t, "FAIL\tm/c\t600.906s\n"+
		"--- UNFINISHED: TestSlow (still running when m/c failed)\n"+
		"panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestSlow (10m0s)\n"+
		"tests: 0 passed, 1 failed, 0 skipped\n", out.String())
}
