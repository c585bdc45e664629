package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review: the README's curl lines carried unquoted URLs with a query
// (`curl -N localhost:8080/session/demo/events?scope=descendants`). zsh, the
// default shell on macOS, globs the `?` and answers "no matches found"
// before curl runs; bash does the same when a file happens to match. Every
// curl line of the README and docs now quotes such a URL.
func TestReviewReadmeCurlLinesSurviveShellGlobbing(t *testing.T) {
	t.Parallel()
	quoted := regexp.MustCompile(`'[^']*'|"[^"]*"`)
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "README.md"))
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for n, line := range strings.Split(string(b), "\n") {
			cmd := strings.TrimSpace(line)
			if !strings.HasPrefix(cmd, "curl ") {
				continue
			}
			checked++
			bare := quoted.ReplaceAllString(cmd, "")
			assert.NotContainsf(t, bare, "?", "%s:%d: quote the URL: %s", f, n+1, cmd)
			assert.NotContainsf(t, bare, "&", "%s:%d: quote the URL: %s", f, n+1, cmd)
			assert.NotContainsf(t, bare, "*", "%s:%d: quote the URL: %s", f, n+1, cmd)
		}
	}
	assert.GreaterOrEqual(t, checked, 3, "the README shows curl commands")
}
