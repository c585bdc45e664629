package browser_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replaybus/replaybus/adapters/browser"
)

// maxGzipBytes is the module's budget: 6 KiB gzipped, as served.
const maxGzipBytes = 6 << 10

func TestModuleFitsItsSizeBudget(t *testing.T) {
	t.Parallel()
	n := browser.GzipSize()
	t.Logf("replaybus.js: %d bytes, %d gzipped (budget %d)", len(browser.Script()), n, maxGzipBytes)
	assert.LessOrEqual(t, n, maxGzipBytes, "replaybus.js gzipped")
}
