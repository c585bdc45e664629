package browser_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestNodeUnitTests runs the module's own tests (testdata/*.test.mjs:
// the event-stream parser, the backoff, one tab's stream against a fake
// server, tabs sharing a connection) under Node's test runner. Without
// node the test is skipped, unless CI is set.
func TestNodeUnitTests(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node not found, and CI is set")
		}
		t.Skip("node not found (set CI=1 to make this a failure)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "testdata/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test testdata/: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
