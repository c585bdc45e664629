package browser_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
)

// The served file, replaybus.min.js, is generated from replaybus.js by the
// esbuild that build/package-lock.json pins (make browser-build). This
// test builds it afresh with the command of build/package.json's "build"
// script, into a temporary file, and compares: a change to replaybus.js
// without a rebuild fails here. Without build/node_modules the test is
// skipped, unless CI is set.
func TestCommittedBuildMatchesAFreshBuild(t *testing.T) {
	t.Parallel()
	esbuild, err := filepath.Abs(filepath.Join("build", "node_modules", ".bin", "esbuild"))
	require.NoError(t, err)
	if _, err := os.Stat(esbuild); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("adapters/browser/build/node_modules missing under CI: run npm ci there (make browser-build)")
		}
		t.Skip("esbuild not installed: cd adapters/browser/build && npm ci (set CI=1 to make this a failure)")
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	raw, err := os.ReadFile(filepath.Join("build", "package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &pkg))
	args := strings.Fields(pkg.Scripts["build"])
	require.NotEmpty(t, args)
	require.Equal(t, "esbuild", args[0], "the build script runs esbuild")
	out := filepath.Join(t.TempDir(), "replaybus.min.js")
	replaced := false
	for i, a := range args {
		if strings.HasPrefix(a, "--outfile=") {
			args[i], replaced = "--outfile="+out, true
		}
	}
	require.True(t, replaced, "the build script names its --outfile")
	cmd := exec.Command(esbuild, args[1:]...)
	cmd.Dir = "build"
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	committed, err := os.ReadFile("replaybus.min.js")
	require.NoError(t, err)
	assert.Equal(t, string(fresh), string(committed), "replaybus.min.js is not the build of replaybus.js: run make browser-build")
	assert.Equal(t, committed, browser.Script(), "the served module is the committed build")
}
