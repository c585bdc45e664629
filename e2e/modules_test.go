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

// Issue 12.14: a program importing only eventbus and adapters/sse got NATS,
// chromedp and Prometheus in its module graph, and go mod tidy was not
// clean. The library module requires none of them (with Go's pruned module
// graphs its go.mod is what a user inherits); they live in modules of their
// own, and go.work lists every module so that make test runs them all.
func TestCoreModuleGraph(t *testing.T) {
	t.Parallel()
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	for _, heavy := range []string{"nats-io", "chromedp", "prometheus", "centrifug", "go-sse"} {
		assert.NotContains(t, string(gomod), heavy, "the library module requires %s", heavy)
	}
	work, err := os.ReadFile(filepath.Join("..", "go.work"))
	require.NoError(t, err)
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\.(?:/[\w./-]+)?)\s*$`).FindAllStringSubmatch(string(work), -1) {
		used[filepath.Clean(m[1])] = true
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			assert.True(t, used[filepath.Clean(rel)], "module %s is not in go.work: make test would skip it", rel)
			if rel != "." {
				assert.True(t, strings.Contains(string(must(os.ReadFile(p))), "replace github.com/replaybus/replaybus => "),
					"module %s builds against this checkout", rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Len(t, used, 7, "the library, adapters/nats, bench, e2e, examples, metrics, tools")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
