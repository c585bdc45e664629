package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// notification is the ACP session/update params shape.
type notification struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		ToolCallID    string `json:"toolCallId"`
		Status        string `json:"status"`
		Title         string `json:"title"`
		Content       json.RawMessage
		Entries       []planEntry `json:"entries"`
	} `json:"update"`
}

func newBus(t *testing.T) *eventbus.Bus {
	t.Helper()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10_000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close() })
	return bus
}

// TestRunShapes runs one fast run and checks that the traffic has the ACP
// shapes and a consistent lifecycle, on the in-memory bus and over NATS
// JetStream (each event published in its turn, Turn.Publish).
func TestRunShapes(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) { t.Parallel(); checkRunShapes(t, newBus(t)) })
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		srv, err := embedded.RunServer(embedded.ServerConfig{Dir: t.TempDir()})
		require.NoError(t, err)
		t.Cleanup(srv.Shutdown)
		bus, err := rbnats.Connect(context.Background(), srv.ClientURL(), eventbus.Options{ReplayBufferSize: 10_000},
			rbnats.WithStorage(jetstream.MemoryStorage))
		require.NoError(t, err)
		t.Cleanup(func() { _ = bus.Close() })
		checkRunShapes(t, bus)
	})
}

func checkRunShapes(t *testing.T, bus *eventbus.Bus) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := bus.Subscribe(ctx, "root", eventbus.SubscribeOptions{Scope: scope.All})
	require.NoError(t, err)

	require.NoError(t, Run(ctx, bus, Options{TokensPerSecond: 20_000, Runs: 1, Pause: -1, Seed: 1}))

	// Everything up to both children's session_closed (the last events).
	var evs []eventbus.Event
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	for n := 0; n < 2; {
		ev, err := sub.Next(rctx)
		require.NoError(t, err, "after %d events", len(evs))
		evs = append(evs, ev)
		if ev.Type == frame.TypeSessionClosed {
			n++
		}
	}
	require.NotEmpty(t, evs)

	bySession := map[string][]string{}
	toolStatus := map[string][]string{}
	var closed []string
	var lastID uint64
	for _, ev := range evs {
		require.Greater(t, ev.ID, lastID, "ids rise")
		lastID = ev.ID
		bySession[ev.Session] = append(bySession[ev.Session], ev.Type)
		switch ev.Type {
		case frame.TypeSessionClosed:
			closed = append(closed, ev.Session)
			continue
		case TypeTurnStart, TypeTurnEnd:
			var d frame.TurnData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			assert.NotEmpty(t, d.Turn)
			if ev.Type == TypeTurnStart {
				assert.Equal(t, ev.Session, d.Session)
			} else {
				assert.Equal(t, frame.ReasonComplete, d.Reason)
			}
			continue
		}
		var n notification
		require.NoError(t, json.Unmarshal(ev.Data, &n), "%s", ev.Data)
		assert.Equal(t, ev.Session, n.SessionID)
		assert.Equal(t, ev.Type, n.Update.SessionUpdate, "the event type is the sessionUpdate kind")
		switch ev.Type {
		case TypeToolCall:
			assert.Equal(t, "pending", n.Update.Status)
			assert.NotEmpty(t, n.Update.Title)
			toolStatus[n.Update.ToolCallID] = append(toolStatus[n.Update.ToolCallID], n.Update.Status)
		case TypeToolCallUpdate:
			toolStatus[n.Update.ToolCallID] = append(toolStatus[n.Update.ToolCallID], n.Update.Status)
		case TypePlan:
			assert.Len(t, n.Update.Entries, 3)
		case TypeMessageChunk, TypeThoughtChunk, TypeUserMessage:
			var c struct{ Type, Text string }
			require.NoError(t, json.Unmarshal(n.Update.Content, &c))
			assert.Equal(t, "text", c.Type)
			assert.NotEmpty(t, c.Text)
		default:
			t.Errorf("unexpected type %q", ev.Type)
		}
	}

	require.Len(t, bySession, 3, "a parent and two children: %v", keys(bySession))
	for s, types := range bySession {
		assert.Equal(t, TypeTurnStart, types[0], "%s starts its turn first", s)
		if s == DefaultParent {
			assert.Equal(t, TypeTurnEnd, types[len(types)-1])
		} else {
			assert.Equal(t, TypeTurnEnd, types[len(types)-2], "%s", s)
			assert.Equal(t, frame.TypeSessionClosed, types[len(types)-1], "%s is closed at the end", s)
			assert.Contains(t, types, TypeToolCall)
			assert.Contains(t, types, TypeMessageChunk)
			assert.Contains(t, types, TypeThoughtChunk)
		}
	}
	assert.ElementsMatch(t, []string{"demo-researcher-1", "demo-coder-1"}, closed)
	for id, st := range toolStatus {
		assert.Equal(t, []string{"pending", "in_progress", "completed"}, st, "tool call %s", id)
	}
	assert.False(t, bus.SessionExists("demo-coder-1"))
	assert.True(t, bus.SessionExists(DefaultParent))
}

// TestRunStopsOnCancel: Run returns nil soon after ctx ends, with every
// goroutine it started gone (goleak checks at the end).
func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, bus, Options{Parent: "p", TokensPerSecond: 50}) }()
	require.Eventually(t, func() bool { return bus.LastEventID() > 20 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestRunBusClosed: a closed bus ends Run with ErrClosed.
func TestRunBusClosed(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), bus, Options{TokensPerSecond: 200}) }()
	require.Eventually(t, func() bool { return bus.LastEventID() > 5 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, bus.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, eventbus.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the bus closed")
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hi there", []string{"Hi ", "there"}},
		{"exponential backoff", []string{"expon", "entia", "l ", "backo", "ff"}},
		{"naïveté", []string{"naïv", "eté"}},
	} {
		got := tokens(tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.in, strings.Join(got, ""), "tokens join back")
	}
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// runUntil starts Run on bus with parent p in the background and waits
// until cond holds; stop ends it and checks it returned nil.
func runUntil(t *testing.T, bus *eventbus.Bus, o Options, cond func() bool) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, bus, o) }()
	require.Eventually(t, cond, 20*time.Second, time.Millisecond)
	return func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

func active(bus *eventbus.Bus, session string) bool {
	_, ok := bus.Turn(session, "")
	return ok
}

// reason is how turn of session ended, read from the log of p's tree (a
// closed child's records stay readable in it); "" while it has not.
func reason(t *testing.T, bus *eventbus.Bus, session, turn string) string {
	t.Helper()
	sub, err := bus.Subscribe(context.Background(), "p", eventbus.SubscribeOptions{Scope: scope.Descendants})
	require.NoError(t, err)
	defer sub.Close()
	for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
		var d frame.TurnData
		if ev.Type == TypeTurnEnd && ev.Session == session && json.Unmarshal(ev.Data, &d) == nil && d.Turn == turn {
			return d.Reason
		}
	}
	return ""
}

// The Stop button on the parent stops the whole run — with or without
// cascade, the sub-agents' turns end too (they run under the parent
// turn's context) — the children are closed, nothing of a turn follows
// its turn_end, and the next run follows.
func TestStopParentStopsTheRun(t *testing.T) {
	t.Parallel()
	for _, cascade := range []bool{false, true} {
		bus := newBus(t)
		stop := runUntil(t, bus, Options{Parent: "p", TokensPerSecond: 100, Pause: 10 * time.Millisecond},
			func() bool { return active(bus, "p-coder-1") && active(bus, "p-researcher-1") })
		res, err := bus.Cancel(context.Background(), "p", frame.TurnData{Cascade: cascade})
		require.NoError(t, err)
		if cascade {
			assert.ElementsMatch(t, []string{"turn-1", "turn-1", "turn-1"}, res.Cancelled)
		} else {
			assert.Equal(t, []string{"turn-1"}, res.Cancelled)
		}
		require.Eventually(t, func() bool { return bus.SessionClosed("p-coder-1") && bus.SessionClosed("p-researcher-1") },
			20*time.Second, time.Millisecond, "the stopped run's children are closed")
		for _, s := range []string{"p", "p-coder-1", "p-researcher-1"} {
			assert.Equal(t, frame.ReasonCancelled, reason(t, bus, s, "turn-1"), s)
		}
		require.Eventually(t, func() bool { _, ok := bus.Turn("p", "turn-2"); return ok }, 20*time.Second, time.Millisecond, "the next run")
		stop()
		assertNoStragglers(t, bus)
	}
}

// A cancel of one sub-agent's turn stops that sub-agent alone: its spawn
// tool call fails, and the parent finishes its turn.
func TestStopSubAgentAlone(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	stop := runUntil(t, bus, Options{Parent: "p", TokensPerSecond: 2000, Pause: time.Hour, Runs: 1},
		func() bool { return active(bus, "p-coder-1") })
	_, err := bus.Cancel(context.Background(), "p-coder-1", frame.TurnData{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return reason(t, bus, "p", "turn-1") != "" }, 30*time.Second, time.Millisecond)
	assert.Equal(t, frame.ReasonComplete, reason(t, bus, "p", "turn-1"))
	assert.Equal(t, frame.ReasonCancelled, reason(t, bus, "p-coder-1", "turn-1"))
	stop()
	sub, err := bus.Subscribe(context.Background(), "p", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	failed := false
	for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
		failed = failed || ev.Type == TypeToolCallUpdate && strings.Contains(string(ev.Data), `"status":"failed"`) &&
			strings.Contains(string(ev.Data), "sub-agent stopped")
	}
	assert.True(t, failed, "the coder's spawn tool call failed")
}

// The agents set the status presence shows: thinking, streaming, and the
// parent's waiting for its sub-agents.
func TestAgentsSetTheirStatus(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	seen := map[string]bool{}
	stop := runUntil(t, bus, Options{Parent: "p", TokensPerSecond: 100, Pause: time.Hour}, func() bool {
		if p, err := bus.Presence("p"); err == nil {
			seen[p.Status] = true
		}
		return seen["thinking"] && seen["streaming"] && seen["waiting"]
	})
	stop()
}

// assertNoStragglers: in every session's log, nothing of a turn follows
// its turn_end (the next turn_start and session_closed may).
func assertNoStragglers(t *testing.T, bus *eventbus.Bus) {
	t.Helper()
	sub, err := bus.Subscribe(context.Background(), "p", eventbus.SubscribeOptions{Scope: scope.All})
	require.NoError(t, err)
	defer sub.Close()
	ended := map[string]bool{}
	for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
		switch ev.Type {
		case TypeTurnEnd:
			ended[ev.Session] = true
		case TypeTurnStart:
			ended[ev.Session] = false
		case frame.TypeSessionClosed, frame.TypeTurnCancel, frame.TypeReplayComplete:
		default:
			assert.False(t, ended[ev.Session], "%s %d %s after its turn_end", ev.Session, ev.ID, ev.Type)
		}
	}
}
