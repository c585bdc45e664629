package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// TestNodeEventSourceReadsHijackedStream: a real EventSource (the npm
// eventsource package) reads a stream served with sse.HandlerOptions.Hijack
// — answered on the connection itself, Connection: close, the body ending
// with the connection — while 200 events are published; halfway the
// handler is shut down (its streams end) and a new one takes the route, so
// the package reconnects by itself with Last-Event-ID and must end up with
// exactly ids 1…200, each once, in order.
func TestNodeEventSourceReadsHijackedStream(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("run", ""))
	newH := func() *sse.Handler {
		h, err := sse.NewHandler(bus, sse.HandlerOptions{Hijack: true, Retry: 100 * time.Millisecond})
		require.NoError(t, err)
		return h
	}
	var cur atomic.Pointer[sse.Handler]
	first := newH()
	cur.Store(first)
	mux := http.NewServeMux()
	mux.HandleFunc(sse.Pattern, func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) })
	ts := httptest.NewServer(mux)
	defer ts.Close()

	const total = 200
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", ts.URL+"/session/run/events", strconv.Itoa(total), "30000", "tick")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(bus)["run"] == 1 }, 20*time.Second, 5*time.Millisecond,
		"the node client never subscribed; stderr: %s", &stderr)
	second := newH()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		assert.NoError(t, second.Shutdown(sctx))
	}()
	for i := 1; i <= total; i++ {
		_, err := bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		if i == total/2 {
			cur.Store(second)
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			require.NoError(t, first.Shutdown(sctx), "the first handler's hijacked stream ends")
			scancel()
		}
		time.Sleep(time.Millisecond) // the pace: the workload, not a wait for something
	}
	select {
	case err := <-waitErr:
		require.NoError(t, err, "node client failed; stderr: %s; stdout: %s", &stderr, &stdout)
	case <-ctx.Done():
		t.Fatalf("node client did not finish; stderr: %s", &stderr)
	}
	var res nodeResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "stdout: %s", &stdout)
	want := make([]uint64, total)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	assert.Equal(t, want, res.IDs, "ids received: exactly 1…200, each once, in order")
	assert.GreaterOrEqual(t, res.Opens, 2, "the package reconnected after the first handler ended its stream")
}
