package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// manyServer starts the example server with every SSE stream cut after
// every id: lines and sessions m0…m(n-1).
func manyServer(t *testing.T, n, every int) (*testServer, *cutter, []string) {
	t.Helper()
	cut := &cutter{n: every}
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{
		SSE:        sse.HandlerOptions{Retry: 100 * time.Millisecond},
		WrapEvents: cut.wrap,
	})
	var sessions []string
	for i := range n {
		s := "m" + strconv.Itoa(i)
		require.NoError(t, ts.bus.CreateSession(s, ""))
		sessions = append(sessions, s)
	}
	return ts, cut, sessions
}

// checkCursors: every reconnect of a cut stream carried a connection
// cursor.
func checkCursors(t *testing.T, cut *cutter) {
	t.Helper()
	lastIDs, cuts := cut.requests()
	require.GreaterOrEqual(t, cuts, 3, "the server must have cut the stream")
	for i, id := range lastIDs[1:] {
		c, err := resume.ParseConnCursor(id)
		require.NoError(t, err, "request %d", i+1)
		require.NotNil(t, c, "request %d resumed without Last-Event-ID", i+1)
	}
	t.Logf("%d connections, %d cuts; the last Last-Event-ID %q", len(lastIDs), cuts, lastIDs[len(lastIDs)-1])
}

// TestChromiumEventSourceManySessions: Chromium's own EventSource (no
// module) reads GET /events?session=m0&session=m1…; the server cuts the
// stream every 15 frames with an id: line; halfway the page adds m9
// through POST /events/{conn} (the connection frame's id) and removes m0.
// The EventSource reconnects by itself with its Last-Event-ID — the URL
// unchanged, the set carried by the cursor — and the page must have, per
// session, exactly the published events, once each and in order (m9's
// from its first, m0's up to its removal).
func TestChromiumEventSourceManySessions(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ts, cut, sessions := manyServer(t, 10, 15)
	urlSet := sessions[:9]
	q := url.Values{"session": urlSet}

	ctx, closeBrowser := browserTab(t, chromium, 90*time.Second)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/healthz")))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`
		window.got = {}; window.bad = []; window.conn = ''; window.opens = 0;
		const es = new EventSource('/events?`+q.Encode()+`');
		window.es = es;
		es.onopen = () => { window.opens++; };
		es.addEventListener('connection', (e) => { window.conn = JSON.parse(e.data).data.connection; });
		es.addEventListener('tick', (e) => {
			const env = JSON.parse(e.data);
			(window.got[env.session] ??= []).push(env.id);
		});
		for (const t of ['state_resync_required', 'session_error', 'client_evicted'])
			es.addEventListener(t, (e) => window.bad.push(e.data));
		true`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.conn !== ''`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err)

	published := map[string][]uint64{}
	pub := func(n int) {
		for i := range n {
			s := sessions[i%len(sessions)]
			ev, err := ts.bus.Publish(s, "tick", map[string]int{"n": i})
			require.NoError(t, err)
			published[s] = append(published[s], ev.ID)
			time.Sleep(time.Millisecond) // the pace: the workload, not a wait
		}
	}
	pub(150)
	// m9 joins, m0 leaves, on the live connection (whichever it is now:
	// a POST to an ended connection is retried with the new one's id).
	var status int
	for range 50 {
		status, err = chromedp.Run(ctx, chromedp.Evaluate[int](`
			fetch('/events/' + window.conn, {method: 'POST', headers: {'Content-Type': 'application/json'},
				body: JSON.stringify({add: [{session: 'm9'}], remove: ['m0']})}).then(r => r.status)`,
			chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		if status == 200 {
			break
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.Sleep(50*time.Millisecond)))
	}
	require.Equal(t, 200, status, "POST /events/{conn}")
	m0 := len(published["m0"])
	pub(150)

	total := 0
	for s, ids := range published {
		if s != "m0" {
			total += len(ids)
		}
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`Object.entries(window.got).filter(([s]) => s !== 'm0').reduce((n, [, v]) => n + v.length, 0) >= `+itoa(total),
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the page must receive every event of the set")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string][]uint64](`window.got`))
	require.NoError(t, err)
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.bad`))
	require.NoError(t, err)
	assert.Empty(t, bad, "no gap or error frame")
	for _, s := range sessions {
		want := published[s]
		if s == "m0" {
			want = want[:m0]
		}
		assert.Equal(t, want, got[s], "session %s: exactly its events, once, in order", s)
	}
	checkCursors(t, cut)
	lastIDs, _ := cut.requests()
	assert.Contains(t, lastIDs[len(lastIDs)-1], ";+m9:session", "the added session rides in the cursor")
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.es.close(); true`))
}

// TestNodeEventSourceManySessions: the npm eventsource package reads four
// sessions on one stream cut every 25 frames; it must end with exactly
// ids 1…200 (each session's, merged), once each, in order.
func TestNodeEventSourceManySessions(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e/node/node_modules/eventsource missing under CI")
		}
		t.Skip("e2e/node/node_modules missing: run npm ci in e2e/node")
	}
	const total = 200
	ts, cut, sessions := manyServer(t, 4, 25)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, "client.mjs", ts.ts.URL+"/events?"+url.Values{"session": sessions}.Encode(), strconv.Itoa(total), "30000", "tick")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	require.Eventually(t, func() bool { return ts.bus.Stats().Subscribers == 1 }, 20*time.Second, 5*time.Millisecond,
		"the node client never subscribed; stderr: %s", &stderr)
	for i := 1; i <= total; i++ {
		ev, err := ts.bus.Publish(sessions[i%len(sessions)], "tick", map[string]int{"n": i})
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.ID)
		time.Sleep(time.Millisecond) // the pace: the workload, not a wait
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
	for _, f := range res.Frames {
		assert.True(t, f == "replay_complete", "frame %s announces a gap", f)
	}
	checkCursors(t, cut)
	for _, r := range res.Requests[1:] {
		require.NotNil(t, r.LastEventID)
		assert.False(t, strings.Contains(*r.LastEventID, ";"), "a plain set has plain ids: %q", *r.LastEventID)
	}
}
