package e2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/demo"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// incarnation is one run of the example server on a fixed address, as the
// agentserver command runs it with -demo: a transcript as the bus's
// snapshot provider when the session is there from the start.
type incarnation struct {
	bus  *eventbus.Bus
	addr string
	stop func()
}

// startIncarnation serves a new bus (a new epoch) on addr ("127.0.0.1:0"
// the first time) with a replay buffer of ring events. With session set,
// demo.DefaultParent exists before it listens and a transcript follows it.
func startIncarnation(t *testing.T, addr string, ring int, session bool) *incarnation {
	t.Helper()
	tr := server.NewTranscript(server.TranscriptOptions{})
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: ring, Snapshots: tr.Snapshot})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if session {
		require.NoError(t, bus.CreateSession(demo.DefaultParent, ""))
		read, err := tr.Follow(ctx, bus, demo.DefaultParent)
		require.NoError(t, err)
		wg.Go(func() { _ = read() })
	}
	srv, err := server.New(bus, server.Options{
		DefaultSession: demo.DefaultParent, DefaultScope: scope.Descendants, Types: demo.Types,
		SSE: sse.HandlerOptions{Retry: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	var ln net.Listener
	require.Eventually(t, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "listening on %s: %v", addr, err)
	hs := &http.Server{Handler: srv}
	hs.RegisterOnShutdown(func() { _ = srv.Close() })
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	var once sync.Once
	in := &incarnation{bus: bus, addr: ln.Addr().String()}
	in.stop = func() {
		once.Do(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			assert.NoError(t, hs.Shutdown(sctx))
			<-served
			assert.NoError(t, srv.WS().Shutdown(sctx))
			cancel()
			_ = bus.Close()
			wg.Wait()
		})
	}
	t.Cleanup(in.stop)
	return in
}

// say publishes n agent_message_chunk events ("<prefix><i> ") to the demo
// session and returns their text.
func say(t *testing.T, bus *eventbus.Bus, prefix string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		text := prefix + itoa(i) + " "
		b.WriteString(text)
		_, err := bus.Publish(demo.DefaultParent, demo.TypeMessageChunk, map[string]any{
			"sessionId": demo.DefaultParent,
			"update":    map[string]any{"sessionUpdate": demo.TypeMessageChunk, "content": map[string]any{"type": "text", "text": text}},
		})
		require.NoError(t, err)
	}
	return b.String()
}

// Issue 27.3, in Chromium: the restart path is one sequence a page follows
// with EventSource alone (docs/protocol.md, "After a restart"). Before,
// the demo's restarted server (its transcript the snapshot provider)
// answered the page's reconnect with snapshot{epoch_reset} alone: the page
// showed the snapshot's text only, not the new epoch's events already
// published, and a page listening only for state_resync_required — a bare
// EventSource beside the demo page's — was told nothing; and once a server
// restarted without the session, the page's EventSource hit 404 and
// closed for good. Now: state_resync_required{epoch_reset} first, always;
// the whole new history (a snapshot first only when the buffer no longer
// holds it); replay_complete; and a 404 from the new epoch is retried
// until the session is back.
func TestChromiumRestartSequence(t *testing.T) {
	chromium := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	for _, tc := range []struct {
		name         string
		ring         int  // the new server's replay buffer
		lateSession  bool // the new server creates the session seconds after it listens
		wantSnapshot bool
	}{
		{"session there, whole history replayed", 100, false, false},
		{"history longer than the buffer, snapshot then tail", 5, false, true},
		{"session re-created seconds later", 100, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startIncarnation(t, "127.0.0.1:0", 100, true)
			textA := say(t, a.bus, "a", 12)

			ctx, closeBrowser := browserTab(t, chromium, 90*time.Second)
			defer closeBrowser()
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+a.addr+"/")))
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.receivedIds.length === 12`,
				chromedp.WithPollingTimeout(30*time.Second)))
			require.NoError(t, err, "the first server's events: %s", pageState(ctx))
			got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`window.agentText`))
			require.NoError(t, err)
			require.Equal(t, textA, got[demo.DefaultParent])
			// A page that listens only for state_resync_required, as
			// docs/protocol.md teaches: a bare EventSource.
			_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
				window.bare = { reasons: [], opened: 0 };
				const es = new EventSource("/session/demo/events?scope=descendants");
				es.onopen = () => window.bare.opened++;
				es.addEventListener("state_resync_required", (e) => window.bare.reasons.push(JSON.parse(e.data).data.reason));
				window.bare.es = es;
				return true;
			})()`))
			require.NoError(t, err)
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.bare.opened === 1`, chromedp.WithPollingTimeout(10*time.Second)))
			require.NoError(t, err)

			a.stop()
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "reconnecting" || window.connState === "closed"`,
				chromedp.WithPollingTimeout(10*time.Second)))
			require.NoError(t, err, "the page notices the server is gone")

			b := startIncarnation(t, a.addr, tc.ring, !tc.lateSession)
			require.NotEqual(t, a.bus.Epoch(), b.bus.Epoch())
			var textB string
			if tc.lateSession {
				// The page's EventSource meets 404 from the new epoch and
				// closes; the page retries within its grace.
				_, err = chromedp.Run(ctx, chromedp.Poll[bool](
					`!document.getElementById("notice").hidden && document.getElementById("notice").textContent.includes("not there yet")`,
					chromedp.WithPollingTimeout(20*time.Second)))
				require.NoError(t, err, "the page says it waits for the session: %s", pageState(ctx))
				time.Sleep(2 * time.Second) // several 404s, as when an agent takes its time
				require.NoError(t, b.bus.CreateSession(demo.DefaultParent, ""))
			}
			textB = say(t, b.bus, "b", 12)
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.connState === "open" && window.restarts.length === 1 && !window.replaybusPage.resyncing`,
				chromedp.WithPollingTimeout(30*time.Second)))
			require.NoError(t, err, "the page follows the restart: %s", pageState(ctx))

			state, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
				first: window.frames[0],
				restart: window.restarts[0],
				text: window.agentText.demo || "",
				ids: window.receivedIds,
			})`))
			require.NoError(t, err)
			first, _ := state["first"].(map[string]any)
			require.NotNil(t, first)
			assert.Equal(t, "state_resync_required", first["type"], "the first frame after the restart")
			data, _ := first["data"].(map[string]any)
			assert.Equal(t, "epoch_reset", data["reason"])
			assert.Equal(t, b.bus.Epoch(), data["epoch"])
			restart, _ := state["restart"].(map[string]any)
			assert.Equal(t, tc.wantSnapshot, restart["snapshot"], "a snapshot only when the buffer lost the new history's start")
			assert.Equal(t, textB, state["text"], "the new epoch's text, whole: shown, not only summarised")
			if !tc.wantSnapshot {
				ids, _ := state["ids"].([]any)
				assert.Len(t, ids, 12, "every event of the new epoch, replayed")
				assert.EqualValues(t, 12, restart["replayed"])
			}
			assert.Equal(t, false, restart["historyLost"], "the snapshot stands for what the buffer lost")

			if !tc.lateSession {
				// The bare EventSource reconnected by itself and was told.
				_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.bare.reasons.includes("epoch_reset")`,
					chromedp.WithPollingTimeout(20*time.Second)))
				assert.NoError(t, err, "a page listening only for state_resync_required is told of the restart")
			}
			_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.bare.es.close(), true)`))
			require.NoError(t, err)
		})
	}
}
