package browser_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
)

// maxGzipBytes is the module's budget: 6 KiB gzipped, as served.
const maxGzipBytes = 6 << 10

func TestModuleFitsItsSizeBudget(t *testing.T) {
	t.Parallel()
	n := browser.GzipSize()
	src, err := os.ReadFile("replaybus.js")
	require.NoError(t, err)
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(src)
	require.NoError(t, zw.Close())
	t.Logf("served replaybus.min.js: %d bytes, %d gzipped (budget %d); readable replaybus.js: %d bytes, %d gzipped",
		len(browser.Script()), n, maxGzipBytes, len(src), b.Len())
	assert.LessOrEqual(t, n, maxGzipBytes, "replaybus.min.js gzipped, as served")
}
