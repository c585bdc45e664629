package nats_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 19 item 4: importing adapters/nats links the nats.go client only.
// The in-process server (nats-server and its dependencies) lives in
// adapters/nats/embedded, which only programs that run a server import.
func TestImportLinksNoNATSServer(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the tests, so it is on PATH")
	deps := func(pkg string) string {
		out, err := exec.Command(goTool, "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	lib := deps("github.com/replaybus/replaybus/adapters/nats")
	assert.Contains(t, lib, "github.com/nats-io/nats.go\n")
	assert.NotContains(t, lib, "github.com/nats-io/nats-server")
	assert.True(t, strings.Contains(deps("github.com/replaybus/replaybus/adapters/nats/embedded"), "github.com/nats-io/nats-server/v2/server\n"),
		"the embedded package does link the server")
}
