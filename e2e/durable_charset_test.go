package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/internal/testkit"
)

// TestDurableClientReadsAnotherCharsetOverSSE: npm @durable-streams/client
// reads a text/plain; charset=iso-8859-1 stream over SSE and gets its
// bytes exactly as appended: the server sends it in base64 with
// Stream-SSE-Data-Encoding: base64, which the client decodes (sent as
// text, the bytes that are not UTF-8 became U+FFFD).
func TestDurableClientReadsAnotherCharsetOverSSE(t *testing.T) {
	node, dir := needDurableDeps(t)
	ts := startServer(t, eventbus.Options{}, server.Options{})
	url := ts.ts.URL + "/v1/stream/latin1"
	data := "caf\xe9 \xa3 \x80\xff"
	do := func(method, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "text/plain; charset=iso-8859-1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, do(http.MethodPut, ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "bytes.mjs", url, strconv.Itoa(len(data)))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return ts.srv.Durable().Stats().SSE > 0 && testkit.SubscriberCounts(ts.bus)["latin1"] > 0 },
		30*time.Second, 10*time.Millisecond, "the client's SSE read")
	require.Equal(t, http.StatusNoContent, do(http.MethodPost, data))
	require.NoError(t, cmd.Wait(), "%s %s", stdout.String(), stderr.String())
	got, err := hex.DecodeString(strings.TrimSpace(stdout.String()))
	require.NoError(t, err, "%q", stdout.String())
	assert.Equal(t, []byte(data), got, "the bytes as appended, through the npm client's SSE read")
}
