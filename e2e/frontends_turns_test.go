package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

var (
	aisdkTurns = flag.Int("aisdk.turns", 5, "seeded turns of TestAISDKClientCutsAndResumesTurns (make aisdk-resume runs 100)")
	aisdkSeed  = flag.Uint64("aisdk.seed", 0, "seed of TestAISDKClientCutsAndResumesTurns; 0 picks one (the test prints it)")
)

// frontendBusOptions is the example server's bus as the agentserver
// command makes it (compacting ACP replies), with room for whole turns.
func frontendBusOptions() eventbus.Options {
	return eventbus.Options{ReplayBufferSize: 4096, ReplayCompact: coalesce.ACP}
}

// frontendAgentRate paces the simulated model in these tests: a turn of
// 2,000 deltas takes half a second, so a client cut mid-way comes back
// while it still runs.
const frontendAgentRate = 4000

// runNodeFor runs script with args for up to d and decodes what it
// prints into out.
func runNodeFor(t *testing.T, d time.Duration, node, dir string, out any, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	err := cmd.Run()
	tail := stdout.String()
	if len(tail) > 2000 {
		tail = "…" + tail[len(tail)-2000:]
	}
	require.NoError(t, err, "node %s: %s; stdout: %s", script, stderr.String(), tail)
	require.NoError(t, json.Unmarshal(stdout.Bytes(), out), "node %s printed %s (stderr %s)", script, stdout.String(), stderr.String())
}

type aisdkTurn struct {
	N                 int      `json:"n"`
	CutAfter          int      `json:"cutAfter"`
	PartialChunks     int      `json:"partialChunks"`
	ActiveAfterNull   bool     `json:"activeAfterNull"`
	ResumedNull       bool     `json:"resumedNull"`
	ResumedChunks     int      `json:"resumedChunks"`
	ResumedTextDeltas int      `json:"resumedTextDeltas"`
	ResumedErrors     []string `json:"resumedErrors"`
	Last              string   `json:"last"`
	Equal             bool     `json:"equal"`
	UncutChunks       int      `json:"uncutChunks"`
	UncutTextDeltas   int      `json:"uncutTextDeltas"`
	UncutErrors       []string `json:"uncutErrors"`
	UncutText         int      `json:"uncutText"`
	AfterNull         bool     `json:"afterNull"`
	Tool              []struct {
		State    string          `json:"state"`
		Input    json.RawMessage `json:"input"`
		ToolName string          `json:"toolName"`
	} `json:"tool"`
	UncutParts   json.RawMessage `json:"uncutParts"`
	ResumedParts json.RawMessage `json:"resumedParts"`
}

type aisdkTurnsOut struct {
	Turns []aisdkTurn `json:"turns"`
	Nulls struct {
		Unknown, During, After bool
	} `json:"nulls"`
	Conflict string `json:"conflict"`
	Stop     struct {
		Stopped struct {
			Status int                   `json:"status"`
			Body   eventbus.CancelResult `json:"body"`
		} `json:"stopped"`
		Last   string   `json:"last"`
		Chunks int      `json:"chunks"`
		Errors []string `json:"errors"`
		Text   string   `json:"text"`
	} `json:"stop"`
	SchemaErrors []string `json:"schemaErrors"`
	Error        string   `json:"error"`
}

// streamText is the text of the example server's reply to "stream n".
func streamText(n int) string {
	words := []string{"replay", "buffer", "cursor", "scope", "session", "event", "turn", "cancel", "presence", "resume"}
	var b strings.Builder
	for i := range n {
		b.WriteString(words[i%len(words)] + " ")
	}
	return b.String()
}

// checkAISDKTurns checks what aisdk-turns.mjs reports: turns of
// 500–2,000 deltas plus a tool call, each cut at a random chunk and
// resumed with reconnectToStream, rebuilt to the uncut UIMessage, until
// turns were resumed (a turn that ended before its client came back gets
// null, rightly, and does not count); 0 schema errors; null exactly when
// no turn is active; the stop ends the stream with abort and keeps the
// partial text. It returns how many turns ended before the resume.
func checkAISDKTurns(t *testing.T, out aisdkTurnsOut, turns int) (early int) {
	t.Helper()
	require.Empty(t, out.Error)
	assert.Empty(t, out.SchemaErrors, "chunks that fail ai's uiMessageChunkSchema")
	resumed := 0
	for i, tr := range out.Turns {
		assert.Empty(t, tr.UncutErrors, "turn %d", i)
		assert.Equal(t, tr.N, tr.UncutTextDeltas, "turn %d: the live stream carries every delta", i)
		assert.Equal(t, len(streamText(tr.N)), tr.UncutText, "turn %d: the whole text", i)
		if assert.Len(t, tr.Tool, 1, "turn %d", i) {
			assert.Equal(t, "output-available", tr.Tool[0].State)
			assert.JSONEq(t, fmt.Sprintf(`{"chunks":%d}`, tr.N), string(tr.Tool[0].Input))
		}
		assert.True(t, tr.AfterNull, "turn %d: no active turn after it, reconnectToStream is null", i)
		if tr.ResumedNull {
			// The producer finished between the cut and the resume:
			// null is right only when the turn is no longer active.
			assert.False(t, tr.ActiveAfterNull, "turn %d: null while its turn was active", i)
			early++
			continue
		}
		resumed++
		assert.Empty(t, tr.ResumedErrors, "turn %d", i)
		assert.True(t, tr.Equal, "turn %d (cut after %d of %d chunks): the resumed UIMessage is the uncut one: %s vs %s",
			i, tr.CutAfter, tr.UncutChunks, tr.ResumedParts, tr.UncutParts)
		assert.Equal(t, "finish", tr.Last, "turn %d", i)
		assert.Less(t, tr.ResumedTextDeltas, tr.N, "turn %d: the resume starts compacted", i)
	}
	assert.True(t, out.Nulls.Unknown, "an unknown chat: 204, null")
	assert.True(t, out.Nulls.During, "a turn active: a stream")
	assert.True(t, out.Nulls.After, "the turn stopped: null")
	assert.Contains(t, out.Conflict, "409", "a second POST while the turn runs")
	assert.Contains(t, out.Conflict, "turn_active")
	assert.Equal(t, http.StatusAccepted, out.Stop.Stopped.Status)
	assert.Len(t, out.Stop.Stopped.Body.Cancelled, 1)
	assert.Equal(t, "abort", out.Stop.Last, "a stop ends the stream with abort")
	assert.Empty(t, out.Stop.Errors)
	assert.NotEmpty(t, out.Stop.Text, "the partial text stays")
	assert.True(t, strings.HasPrefix(streamText(100000), out.Stop.Text), "the partial text is the reply's beginning")
	assert.Equal(t, turns, resumed, "turns cut and resumed")
	return early
}

// TestAISDKClientCutsAndResumesTurns: npm ai 7's DefaultChatTransport
// against the example server's /api/chat (adapters/aisdk). Over
// -aisdk.turns seeded turns ("stream N", N from 500 to 2,000: N text
// deltas and a tool call), each read whole once and, in another chat,
// cut at a random chunk and resumed with reconnectToStream: the rebuilt
// UIMessage equals the uncut one, every chunk passes
// uiMessageChunkSchema, the resume starts with the reply so far in one
// delta. reconnectToStream is null for an unknown chat and after a turn,
// a stream while one runs; a second POST is 409 turn_active; the stop
// route ends the stream with abort and the partial text stays.
// make aisdk-resume runs 100 turns.
func TestAISDKClientCutsAndResumesTurns(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	seed := *aisdkSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	t.Logf("seed %d, %d turns (-aisdk.seed, -aisdk.turns)", seed, *aisdkTurns)
	ts := startServer(t, frontendBusOptions(), server.Options{AgentRate: frontendAgentRate})
	var out aisdkTurnsOut
	start := time.Now()
	runNodeFor(t, 10*time.Minute+time.Duration(*aisdkTurns)*5*time.Second, node, dir, &out, "aisdk-turns.mjs",
		ts.ts.URL, fmt.Sprint(*aisdkTurns), fmt.Sprint(seed))
	early := checkAISDKTurns(t, out, *aisdkTurns)
	var deltas, partial, resumedChunks int
	for _, tr := range out.Turns {
		deltas += tr.N
		partial += tr.PartialChunks
		resumedChunks += tr.ResumedChunks
	}
	t.Logf("%d text deltas in all; the cut streams carried %d chunks before their cut, the resumes %d", deltas, partial, resumedChunks)
	t.Logf("%d turns cut and resumed, each rebuilt to the uncut UIMessage, 0 schema errors, in %v; %d more ended before their client came back (reconnectToStream null, the turn inactive)",
		len(out.Turns)-early, time.Since(start).Round(time.Millisecond), early)
}

type aguiRun struct {
	Events      []string        `json:"events"`
	FirstEvents []string        `json:"firstEvents"`
	Attempts    int             `json:"attempts"`
	LastIDs     []string        `json:"lastIds"`
	Errors      []string        `json:"errors"`
	Status      int             `json:"status"`
	Messages    json.RawMessage `json:"messages"`
	Text        string          `json:"text"`
	RunError    *struct {
		Code, Message string
	} `json:"runError"`
	Cut     int      `json:"cut"`
	ByGet   bool     `json:"byGet"`
	Methods []string `json:"methods"`
}

type aguiTurnsOut struct {
	Whole      aguiRun   `json:"whole"`
	Cuts       []aguiRun `json:"cuts"`
	JoinSource struct {
		Text     string          `json:"text"`
		Messages json.RawMessage `json:"messages"`
		RunError *struct {
			Code, Message string
		} `json:"runError"`
	} `json:"joinSource"`
	JoinCancelStatus int      `json:"joinCancelStatus"`
	Join             aguiRun  `json:"join"`
	Cancel           aguiRun  `json:"cancel"`
	CancelStatus     int      `json:"cancelStatus"`
	Warnings         []string `json:"warnings"`
	ConsoleErrors    []string `json:"consoleErrors"`
	Error            string   `json:"error"`
}

// checkAGUITurns checks what agui-turns.mjs reports.
func checkAGUITurns(t *testing.T, out aguiTurnsOut) {
	t.Helper()
	require.Empty(t, out.Error)
	assert.Empty(t, out.Warnings, "the client's enforcement stripped or dropped nothing")
	w := out.Whole
	require.Empty(t, w.Errors)
	require.NotEmpty(t, w.Events)
	assert.Equal(t, "RUN_STARTED", w.Events[0])
	assert.Equal(t, "RUN_FINISHED", w.Events[len(w.Events)-1])
	assert.NotEmpty(t, w.Text)
	for _, c := range out.Cuts {
		assert.Equal(t, 2, c.Attempts, "cut after %d frames (resumed by GET: %v): one cut run, one resumed", c.Cut, c.ByGet)
		if c.ByGet {
			assert.Equal(t, []string{"POST 200", "GET 200"}, c.Methods, "cut after %d frames: resumed by GET", c.Cut)
		} else {
			assert.Equal(t, []string{"POST 200", "POST 200"}, c.Methods, "cut after %d frames: resumed by POST", c.Cut)
		}
		assert.Empty(t, c.Errors, "cut after %d", c.Cut)
		assert.Equal(t, w.Text, c.Text, "cut after %d frames (%v): the resumed run's text is the uncut one's", c.Cut, c.LastIDs)
		assert.JSONEq(t, string(w.Messages), string(c.Messages), "cut after %d frames: the same messages", c.Cut)
		assert.Equal(t, "RUN_FINISHED", c.Events[len(c.Events)-1])
	}
	j := out.Join
	assert.Equal(t, []string{"RUN_STARTED", "MESSAGES_SNAPSHOT"}, j.FirstEvents, "a join without a cursor: snapshot then tail")
	// The run (100,000 deltas: 25 s) is cancelled once the join has its
	// snapshot: both agents end with RUN_ERROR cancelled.
	assert.Equal(t, http.StatusAccepted, out.JoinCancelStatus)
	require.NotNil(t, out.JoinSource.RunError, "the source run ends by the cancel")
	require.NotNil(t, j.RunError, "the joined agent ends by the cancel")
	assert.Equal(t, "cancelled", out.JoinSource.RunError.Code)
	assert.Equal(t, "cancelled", j.RunError.Code)
	assert.NotEmpty(t, j.Text)
	assert.Equal(t, out.JoinSource.Text, j.Text, "the joined agent ends with the run's text")
	assert.JSONEq(t, string(out.JoinSource.Messages), string(j.Messages))
	c := out.Cancel
	assert.Equal(t, http.StatusAccepted, out.CancelStatus)
	require.NotNil(t, c.RunError, "a cancelled run ends with RUN_ERROR")
	assert.Equal(t, "cancelled", c.RunError.Code)
	assert.Equal(t, "RUN_ERROR", c.Events[len(c.Events)-1])
	assert.NotEmpty(t, c.Text, "the partial text stays")
	assert.True(t, strings.HasPrefix(streamText(100000), c.Text))
}

// TestAGUIClientAgainstTheExampleServer: @ag-ui/client 1.0.0's HttpAgent
// against the example server's /agui (adapters/agui). A run of the
// model's reply (reasoning, a search tool call and its result, the
// answer) read whole; the same reply on other threads cut after various
// frames and resumed by Last-Event-ID (the id of the last frame read;
// by the agent's POST, or by GET {path}/{threadId}/stream) ends with the
// same text and messages; a join without a cursor of a
// running turn starts with RUN_STARTED + MESSAGES_SNAPSHOT and ends with
// the run's messages; a cancel ends the run with RUN_ERROR code
// cancelled, the partial text kept. No warning of the client's schema
// enforcement, no error of its verifier.
func TestAGUIClientAgainstTheExampleServer(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	ts := startServer(t, frontendBusOptions(), server.Options{AgentRate: frontendAgentRate})
	var out aguiTurnsOut
	runNodeFor(t, 3*time.Minute, node, dir, &out, "agui-turns.mjs", ts.ts.URL, "where is the replay cursor kept", "1,3,g13,21,g40")
	checkAGUITurns(t, out)
	for _, c := range out.Cuts {
		t.Logf("cut after %d frames at %s, resumed: %d events, %d bytes of text", c.Cut, c.LastIDs[0], len(c.Events), len(c.Text))
	}
	t.Logf("join: %d events, first %v", len(out.Join.Events), out.Join.FirstEvents)
}

type a2aTurnsOut struct {
	ProtocolVersion string     `json:"protocolVersion"`
	Stream          []a2aEvent `json:"stream"`
	After           []a2aEvent `json:"after"`
	Source          []a2aEvent `json:"source"`
	During          []a2aEvent `json:"during"`
	CutHead         []a2aEvent `json:"cutHead"`
	CutLastID       string     `json:"cutLastId"`
	CutTail         []a2aEvent `json:"cutTail"`
	CancelStatus    int        `json:"cancelStatus"`
	Unknown         []struct {
		Case, Error string
	} `json:"unknown"`
	Error string `json:"error"`
}

// a2aText is the reply's text in a2a events: the task's text artifacts,
// then the text artifact updates, in order.
func a2aText(evs []a2aEvent) string {
	var b strings.Builder
	for _, e := range evs {
		switch {
		case e.Case == "task":
			for _, a := range e.Artifacts {
				if strings.HasPrefix(a.ArtifactID, "text-") {
					for _, p := range a.Parts {
						b.WriteString(*p.Text)
					}
				}
			}
		case e.Case == "artifactUpdate" && strings.HasPrefix(e.ArtifactID, "text-"):
			for _, p := range e.Parts {
				b.WriteString(*p.Text)
			}
		}
	}
	return b.String()
}

// checkA2ATurns checks what a2a-turns.mjs reports for one version.
func checkA2ATurns(t *testing.T, out a2aTurnsOut, version string) {
	t.Helper()
	require.Empty(t, out.Error)
	assert.Equal(t, version, out.ProtocolVersion)
	for name, evs := range map[string][]a2aEvent{"stream": out.Stream, "after": out.After, "source": out.Source, "during": out.During} {
		require.NotEmpty(t, evs, name)
		assert.Equal(t, "task", evs[0].Case, "%s: the task first", name)
		for _, e := range evs[1:] {
			assert.NotEqual(t, "task", e.Case, "%s: one task, first", name)
		}
	}
	for name, evs := range map[string][]a2aEvent{"stream": out.Stream, "after": out.After} {
		assert.Equal(t, "completed", evs[len(evs)-1].State, "%s: the terminal status last", name)
	}
	assert.Equal(t, "submitted", out.Stream[0].State)
	assert.NotEmpty(t, a2aText(out.Stream))
	assert.Equal(t, a2aText(out.Stream), a2aText(out.After), "the terminal task holds the whole reply")
	require.Len(t, out.After, 1, "a terminal task: the task alone")
	assert.Equal(t, http.StatusAccepted, out.CancelStatus)
	for name, evs := range map[string][]a2aEvent{"source": out.Source, "during": out.During} {
		assert.Equal(t, "canceled", evs[len(evs)-1].State, "%s: cancelled while it ran", name)
	}
	assert.Equal(t, "working", out.During[0].State, "resubscribed while it runs")
	text := a2aText(out.Source)
	assert.NotEmpty(t, text)
	assert.True(t, strings.HasPrefix(streamText(100000), text), "the reply up to the cancel")
	assert.Equal(t, text, a2aText(out.During), "the task so far, then the rest: the same reply, once")
	if assert.NotEmpty(t, out.During[0].Artifacts) {
		assert.Len(t, out.During[0].Artifacts[0].Parts, 1, "the reply so far in one part")
	}
	require.NotEmpty(t, out.CutHead)
	assert.NotEqual(t, "completed", out.CutHead[len(out.CutHead)-1].State, "the head was cut")
	require.NotEmpty(t, out.CutTail, "resumed after %s", out.CutLastID)
	assert.NotEqual(t, "task", out.CutTail[0].Case, "Last-Event-ID: exactly the updates after it, no task")
	assert.Equal(t, "completed", out.CutTail[len(out.CutTail)-1].State)
	assert.Equal(t, streamText(1000), a2aText(out.CutHead)+a2aText(out.CutTail), "cut and resumed by Last-Event-ID: the whole reply once")
	require.Len(t, out.Unknown, 1)
	assert.Contains(t, out.Unknown[0].Error, "not found")
}

// TestA2AClientAgainstTheExampleServer: @a2a-js/sdk 1.3.0's client
// against the example server's /a2a (adapters/a2a) and its agent card,
// over protocol 1.0 and 0.3: a message's stream starts with the task
// (submitted) and ends completed; resubscribeTask to the finished task
// gets the terminal task alone, holding the whole reply; resubscribeTask
// while a task runs gets the task first (working, the reply so far in
// one part), then the rest, then — a cancel through the bus once it has
// its task — canceled, with the reply the message's stream got; a stream
// cut after
// 37 frames and resubscribed with Last-Event-ID gets exactly the updates
// after it; an unknown task is a JSON-RPC task-not-found error.
func TestA2AClientAgainstTheExampleServer(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	ts := startServer(t, frontendBusOptions(), server.Options{AgentRate: frontendAgentRate})
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			var out a2aTurnsOut
			runNodeFor(t, 3*time.Minute, node, dir, &out, "a2a-turns.mjs", ts.ts.URL, version)
			checkA2ATurns(t, out, version)
		})
	}
}

// startNATSServers starts two example servers, each over its own bus
// node on one embedded NATS server (what two agentserver processes with
// -nats-url are): a turn started through one runs on its node, and the
// other reads it from the shared log.
func startNATSServers(t *testing.T) (node1, node2 *testServer) {
	t.Helper()
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	t.Cleanup(ns.Shutdown)
	start := func() *testServer {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		bus, err := rbnats.Connect(ctx, ns.ClientURL(), frontendBusOptions())
		require.NoError(t, err)
		srv, err := server.New(bus, server.Options{AgentRate: frontendAgentRate})
		require.NoError(t, err)
		ts := httptest.NewServer(srv)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.StopAgents(ctx)
			ts.CloseClientConnections()
			ts.Close()
			_ = bus.Close()
		})
		return &testServer{bus: bus, srv: srv, ts: ts}
	}
	return start(), start()
}

// TestFrontendsAcrossNATSNodes: each projection serves a turn that runs
// on another node. Two example servers over two bus nodes on one
// embedded NATS server; the clients start their turns on node 1 and
// resume, join and resubscribe on node 2: npm ai's reconnectToStream
// (cut turns rebuilt to the uncut UIMessage, null exactly when no turn
// is active), @ag-ui/client's Last-Event-ID resumes and join, and
// @a2a-js/sdk's resubscribeTask (the task first, then the rest, then
// completed) and its Last-Event-ID resume.
func TestFrontendsAcrossNATSNodes(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	n1, n2 := startNATSServers(t)
	require.NotEqual(t, n1.ts.URL, n2.ts.URL)
	t.Run("aisdk", func(t *testing.T) {
		var out aisdkTurnsOut
		runNodeFor(t, 5*time.Minute, node, dir, &out, "aisdk-turns.mjs", n1.ts.URL, "2", "7", n2.ts.URL)
		checkAISDKTurns(t, out, 2)
	})
	t.Run("agui", func(t *testing.T) {
		var out aguiTurnsOut
		runNodeFor(t, 3*time.Minute, node, dir, &out, "agui-turns.mjs", n1.ts.URL, "where is the replay cursor kept", "1,g3,13,g30", n2.ts.URL)
		checkAGUITurns(t, out)
	})
	t.Run("a2a", func(t *testing.T) {
		var out a2aTurnsOut
		runNodeFor(t, 3*time.Minute, node, dir, &out, "a2a-turns.mjs", n1.ts.URL, "1.0", n2.ts.URL)
		checkA2ATurns(t, out, "1.0")
	})
}
