package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// nodeResult is what e2e/node/client.mjs prints.
type nodeResult struct {
	IDs      []uint64 `json:"ids"`
	Frames   []string `json:"frames"`
	Requests []struct {
		LastEventID *string `json:"lastEventId"`
	} `json:"requests"`
	Opens  int   `json:"opens"`
	Errors int   `json:"errors"`
	MS     int64 `json:"ms"`
}

// TestNodeEventSourceResumes: the npm eventsource package reads a session
// while the test publishes 1…200 and the server cuts the connection after
// every 50 events; the package reconnects by itself with Last-Event-ID and
// must end up with exactly ids 1…200, each once, in order.
func TestNodeEventSourceResumes(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}

	const total, every = 200, 50
	cut := &cutter{n: every}
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{
		SSE:        sse.HandlerOptions{Retry: 100 * time.Millisecond},
		WrapEvents: cut.wrap,
	})
	require.NoError(t, ts.bus.CreateSession("run", ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", ts.ts.URL+"/session/run/events", strconv.Itoa(total), "30000", "tick")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()

	// Publish once the client is subscribed, about one event a millisecond,
	// so that the cuts land while publishing goes on: each resume replays
	// what was published meanwhile, then goes on live.
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(ts.bus)["run"] == 1 }, 20*time.Second, 5*time.Millisecond,
		"the node client never subscribed; stderr: %s", &stderr)
	start := time.Now()
	for i := 1; i <= total; i++ {
		ev, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.ID)
		time.Sleep(time.Millisecond) // the pace above: the workload, not a wait for something
	}
	publishMS := time.Since(start).Milliseconds()

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
	// replay_complete closes each resume's replay (it may be cut off with its
	// connection); any other frame here would announce a gap or a drop.
	var gaps []string
	for _, f := range res.Frames {
		if f != "replay_complete" {
			gaps = append(gaps, f)
		}
	}
	assert.Empty(t, gaps, "no gap should have been announced")

	lastIDs, cuts := cut.requests()
	assert.GreaterOrEqual(t, cuts, total/every-1, "the server must have cut the stream")
	require.GreaterOrEqual(t, len(lastIDs), total/every, "one request per connection")
	assert.Empty(t, lastIDs[0], "the first request has no Last-Event-ID")
	for i := 1; i < total/every; i++ {
		c, err := resume.ParseCursor(lastIDs[i])
		require.NoError(t, err, "request %d Last-Event-ID %q", i, lastIDs[i])
		require.NotNil(t, c)
		assert.Equal(t, uint64(i*every), c.ID, "request %d resumes after the last id of the cut connection", i)
	}
	st := ts.bus.Stats()
	assert.Zero(t, st.Guarded, "the bus's reinsert guard must never fire")
	t.Logf("node eventsource: %d ids, %d connections (Last-Event-ID %q), %d cuts, opens=%d errors=%d, %d replayed by the bus, client %d ms, publish %d ms",
		len(res.IDs), len(lastIDs), lastIDs, cuts, res.Opens, res.Errors, st.Replayed, res.MS, publishMS)
}

// TestNodeEventSourceLiveOnlyResumesFromStart (issue 18 item 3): a real
// EventSource (the npm eventsource package) on a live-only URL (?replay=0)
// whose first connection is cut right after the stream's start line —
// before its first event — reconnects with that line's id as Last-Event-ID
// and receives the events published during the cut: the id-only line set
// lastEventId without dispatching an event.
func TestNodeEventSourceLiveOnlyResumesFromStart(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}

	const total = 10
	c := newCutAfterStart()
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{
		SSE:        sse.HandlerOptions{Retry: 100 * time.Millisecond},
		WrapEvents: c.wrap,
	})
	require.NoError(t, ts.bus.CreateSession("run", ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", ts.ts.URL+"/session/run/events?replay=0", strconv.Itoa(total), "30000", "tick")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()

	require.Eventually(t, func() bool { _, cuts := c.first.requests(); return cuts == 1 }, 20*time.Second, 5*time.Millisecond,
		"the first connection was never cut after its start line; stderr: %s", &stderr)
	for i := 1; i <= total; i++ {
		_, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}
	close(c.published)

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
	assert.Equal(t, want, res.IDs, "every event published during the cut, once, in order")
	lastIDs, _ := c.first.requests()
	require.GreaterOrEqual(t, len(lastIDs), 2)
	assert.Empty(t, lastIDs[0], "the first request has no Last-Event-ID")
	assert.Equal(t, ts.bus.Epoch()+"-0", lastIDs[1], "the reconnect resumes from the start line's id")
}

// TestNodeEventSourceResumesAfterSnapshot (issue 20): a real EventSource
// (the npm eventsource package) joins with ?snapshot=1, receives the
// snapshot frame (state as of id 3) and is cut right after it, before any
// event; it reconnects by itself, on the same URL, with the snapshot's id
// as Last-Event-ID, and receives exactly the events after id 3 — no second
// snapshot, no gap.
func TestNodeEventSourceResumesAfterSnapshot(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI: .ci/run must run npm ci in e2e/node")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}

	const asOf, total = 3, 10
	c := newCutAfterStart() // the first frame with an id: line is the snapshot
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000,
		Snapshots: func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
			return json.RawMessage(`{"n":3}`), asOf, nil
		}}, server.Options{SSE: sse.HandlerOptions{Retry: 100 * time.Millisecond}, WrapEvents: c.wrap})
	for i := 1; i <= asOf; i++ {
		_, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", ts.ts.URL+"/session/run/events?snapshot=1", strconv.Itoa(total), "30000", "tick")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()

	require.Eventually(t, func() bool { _, cuts := c.first.requests(); return cuts == 1 }, 20*time.Second, 5*time.Millisecond,
		"the first connection was never cut after the snapshot; stderr: %s", &stderr)
	for i := asOf + 1; i <= total; i++ {
		_, err := ts.bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}
	close(c.published)

	select {
	case err := <-waitErr:
		require.NoError(t, err, "node client failed; stderr: %s; stdout: %s", &stderr, &stdout)
	case <-ctx.Done():
		t.Fatalf("node client did not finish; stderr: %s", &stderr)
	}
	var res nodeResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "stdout: %s", &stdout)
	assert.Equal(t, []uint64{4, 5, 6, 7, 8, 9, 10}, res.IDs, "exactly the events after the snapshot's id, once, in order")
	var snapshots int
	for _, f := range res.Frames {
		assert.Contains(t, []string{"snapshot", "replay_complete"}, f, "no gap announced")
		if f == "snapshot" {
			snapshots++
		}
	}
	assert.Equal(t, 1, snapshots, "one snapshot: the reconnect resumes after it")
	lastIDs, _ := c.first.requests()
	require.GreaterOrEqual(t, len(lastIDs), 2)
	assert.Empty(t, lastIDs[0], "the first request has no Last-Event-ID")
	assert.Equal(t, ts.bus.Epoch()+"-3", lastIDs[1], "the reconnect sends the snapshot's id")
}
