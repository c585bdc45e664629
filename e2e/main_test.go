package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, stops the Chromium they shared (browserTab),
// then fails the run on a leaked goroutine, as goleak.VerifyTestMain does.
func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
