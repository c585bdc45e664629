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

// Issue 18.12: the README never said how to create a session over HTTP
// (POST /sessions was only in go doc), its porting table said sessions are
// created on first publish (not so on the example server: 404), and it kept
// quiet about the first run's long compile and about `go run … &` + `kill $!`
// leaving the server running. Every route of the example server
// (examples/agentserver/server's package doc) is now in the README's API
// table, and the README says the rest.
func TestReadmeHasTheExampleServersAPI(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "examples", "agentserver", "server", "doc.go"))
	require.NoError(t, err)
	routes := regexp.MustCompile(`(?m)^//\t(GET|POST|DELETE) +(/\S*)`).FindAllStringSubmatch(string(doc), -1)
	require.GreaterOrEqual(t, len(routes), 8, "the package doc lists the routes")
	for _, r := range routes {
		assert.True(t, strings.Contains(string(readme), "| `"+r[1]+" "+r[2]+"` |"), "README's API table lacks %s %s", r[1], r[2])
	}
	for _, want := range []string{
		"POST /sessions",        // how to create a session
		"404 session_not_found", // what an unknown session gets
		"go: downloading",       // the first run's silence
		"kill $!",               // stopping a background run
		"RequireSession: true",  // issue 18.13: refusing a misspelled id in process
		"408 request_timeout",   // the body bound
		"skipped test",          // make test's skip summary
	} {
		assert.True(t, strings.Contains(string(readme), want), "README does not say %q", want)
	}
}
