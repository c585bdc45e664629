package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// The frontend protocols' real clients (e2e/frontends: npm ai 7,
// @ag-ui/client 1.0.0, @a2a-js/sdk 1.3.0) read what this project's
// encoders write. Until the turns feature gives the handlers their routes,
// a small httptest server stands in for them: it serves a turn taken from
// a real bus — published with package acp, read live by a subscriber and
// back from the compacting replay buffer — through packages codec, aisdk,
// agui and a2a, the way the handlers will.

// needFrontends returns node and the e2e/frontends directory, skipping
// when they are missing (failing under CI).
func needFrontends(t *testing.T) (node, dir string) {
	t.Helper()
	node = needTool(t, "node", "nodejs")
	dir, err := filepath.Abs("frontends")
	require.NoError(t, err)
	for _, pkg := range []string{"ai", "@ag-ui/client", "@a2a-js/sdk", "@durable-streams/aisdk-transport"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("e2e/frontends/node_modules/%s missing under CI: .ci/run must run npm ci in e2e/frontends", pkg)
			}
			t.Skip("e2e/frontends/node_modules missing: run npm ci in e2e/frontends (set CI=1 to make this a failure)")
		}
	}
	return node, dir
}

// runNode runs script with args and decodes what it prints into out.
func runNode(t *testing.T, node, dir string, out any, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	require.NoError(t, cmd.Run(), "node %s: %s", script, stderr.String())
	require.NoError(t, json.Unmarshal(stdout.Bytes(), out), "node %s printed %s (stderr %s)", script, stdout.String(), stderr.String())
}

// turnFixture is one turn of session s1 as a bus holds it.
type turnFixture struct {
	live      []eventbus.Event // every event, as a live subscriber got them
	prefix    []eventbus.Event // the first half from the compacting replay buffer
	compacted []eventbus.Event // the whole turn from the compacting replay buffer
	half      uint64           // the last id of the first half
	text      string           // the reply's text
	thought   string
}

// newTurn publishes a turn with the acp helpers: turn_start, reasoning,
// 40 text deltas around a tool call and its result, a plan, an event of
// the application's own, turn_end.
func newTurn(t *testing.T) *turnFixture {
	t.Helper()
	return recordTurn(t, func(bus *eventbus.Bus, f *turnFixture, pub func(acp.Update)) {
		turn, err := bus.StartTurn(context.Background(), "s1", eventbus.TurnOptions{ID: "turn-1"})
		require.NoError(t, err)
		for _, s := range []string{"Let me ", "look ", "first."} {
			f.thought += s
			pub(acp.ThoughtChunk(s))
		}
		say := func(from, to int) {
			for i := from; i < to; i++ {
				s := fmt.Sprintf("w%d ", i)
				f.text += s
				pub(acp.MessageChunk(s))
			}
		}
		say(0, 20)
		pub(acp.Plan{Entries: []acp.PlanEntry{{Content: "Read the file", Priority: "high", Status: "in_progress"}}})
		pub(acp.ToolCall{ToolCallID: "call-1", Title: "Read a.go", Kind: "read", Status: acp.StatusPending, RawInput: map[string]string{"path": "a.go"}})
		f.prefix = replayed(t, bus)
		f.half = f.prefix[len(f.prefix)-1].ID
		pub(acp.ToolCallUpdate{ToolCallID: "call-1", Status: acp.StatusInProgress})
		pub(acp.ToolCallUpdate{ToolCallID: "call-1", Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent("package a")}})
		_, err = bus.Publish("s1", "note", map[string]string{"by": "app"})
		require.NoError(t, err)
		say(20, 40)
		_, err = turn.End(nil)
		require.NoError(t, err)
	})
}

// recordTurn records the turn that publish publishes into session s1 of a
// compacting bus (publish sets f.prefix, f.half, f.text and f.thought;
// pub publishes one ACP update): what a live subscriber got and what the
// replay buffer holds at the end.
func recordTurn(t *testing.T, publish func(bus *eventbus.Bus, f *turnFixture, pub func(acp.Update))) *turnFixture {
	t.Helper()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000, ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close() })
	require.NoError(t, bus.CreateSession("s1", ""))
	sub, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: 1000})
	require.NoError(t, err)
	defer sub.Close()

	f := &turnFixture{}
	pub := func(u acp.Update) {
		_, err := acp.Publish(bus, "s1", u)
		require.NoError(t, err)
	}
	publish(bus, f, pub)
	f.compacted = replayed(t, bus)
	for len(f.live) < int(f.compacted[len(f.compacted)-1].ID) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ev, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err)
		f.live = append(f.live, ev)
	}
	require.Less(t, len(f.compacted), len(f.live)/3, "the replay buffer compacted the reply")
	return f
}

// replayed reads session s1's replay buffer.
func replayed(t *testing.T, bus *eventbus.Bus) []eventbus.Event {
	t.Helper()
	sub, err := bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
	require.NoError(t, err)
	defer sub.Close()
	var out []eventbus.Event
	for {
		ev, ok := sub.TryNext()
		require.True(t, ok, "the replay ends with replay_complete")
		if ev.ID == 0 {
			return out
		}
		out = append(out, ev)
	}
}

// after returns the events of evs with an id above id.
func after(evs []eventbus.Event, id uint64) []eventbus.Event {
	for i, ev := range evs {
		if ev.ID > id {
			return evs[i:]
		}
	}
	return nil
}

func parts(ev eventbus.Event) []codec.Part { return codec.Default.Decode(nil, ev) }

// frontendServer serves the fixture's turn as the handlers will: the AI
// SDK's POST and resume GET at /api/chat, AG-UI at /agui (?cut=N ends
// after N frames; Last-Event-ID resumes; ?join=1 joins without cursor at
// the fixture's half-way point), A2A at /a2a with its cards.
func frontendServer(t *testing.T, f *turnFixture) *httptest.Server {
	t.Helper()
	const epoch = "ep"
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, b []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	}
	mux.HandleFunc("POST /api/chat", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID       string            `json:"id"`
			Messages []json.RawMessage `json:"messages"`
			Trigger  string            `json:"trigger"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ID == "" || len(body.Messages) == 0 || body.Trigger != "submit-message" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		enc := aisdk.NewEncoder("msg-1")
		var b []byte
		for _, ev := range f.live {
			b = enc.Append(b, parts(ev)...)
		}
		aisdk.SetHeaders(w.Header())
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /api/chat/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "chat-1" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		enc := aisdk.NewEncoder("msg-1")
		var b []byte
		for _, ev := range f.compacted { // the reply so far, compacted, then (here: already) the end
			b = enc.Append(b, parts(ev)...)
		}
		aisdk.SetHeaders(w.Header())
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /agui", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ThreadID string `json:"threadId"`
			RunID    string `json:"runId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ThreadID == "" {
			http.Error(w, "bad RunAgentInput", http.StatusBadRequest)
			return
		}
		enc := agui.NewEncoder(agui.Options{ThreadID: in.ThreadID, RunID: "turn-1", Epoch: epoch})
		var b []byte
		switch cursor := r.Header.Get("Last-Event-ID"); {
		case cursor != "":
			seq, k, mid := strings.Cut(strings.TrimPrefix(cursor, epoch+"-"), ":")
			n, err := strconv.ParseUint(seq, 10, 64)
			require.NoError(t, err, cursor)
			enc.Skip(-1)
			for _, ev := range f.live {
				if ev.ID < n || ev.ID == n && !mid {
					enc.Append(nil, parts(ev)...)
				}
			}
			enc.Skip(0)
			if mid {
				skip, err := strconv.Atoi(k)
				require.NoError(t, err, cursor)
				enc.Skip(skip + 1)
				b = enc.Reattach(b, cursor, false)
				b = enc.Append(b, parts(f.live[n-1])...)
			} else {
				b = enc.Reattach(b, cursor, false)
			}
			for _, ev := range after(f.live, n) {
				b = enc.Append(b, parts(ev)...)
			}
		case r.URL.Query().Get("join") == "1":
			enc.Skip(-1)
			for _, ev := range f.prefix { // the run so far, compacted
				enc.Append(nil, parts(ev)...)
			}
			enc.Skip(0)
			b = enc.Reattach(b, epoch+"-"+strconv.FormatUint(f.half, 10), true)
			for _, ev := range after(f.live, f.half) {
				b = enc.Append(b, parts(ev)...)
			}
		default:
			for _, ev := range f.live {
				b = enc.Append(b, parts(ev)...)
			}
			if cut, _ := strconv.Atoi(r.URL.Query().Get("cut")); cut > 0 {
				b = b[:frameEnd(b, cut)]
			}
		}
		write(w, b)
	})
	var base string
	card := func(v ...a2a.Version) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(a2a.Card{Name: "replaybus e2e", Description: "a recorded turn", Version: "1",
				URL: base + "/a2a", Skills: []a2a.Skill{{ID: "chat", Name: "Chat", Description: "replies"}}, Versions: v})
		}
	}
	mux.HandleFunc("GET /.well-known/agent-card.json", card())
	mux.HandleFunc("GET /legacy/.well-known/agent-card.json", card(a2a.V03))
	mux.HandleFunc("POST /a2a", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := a2a.ParseRequest(body)
		if err != nil {
			var e *a2a.Error
			require.ErrorAs(t, err, &e)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(a2a.AppendError(nil, req.ID, e))
			return
		}
		enc := a2a.NewEncoder(a2a.Options{Version: req.Version, RequestID: req.ID, TaskID: "turn-1", ContextID: "s1", Epoch: epoch})
		var b []byte
		tail := f.live
		if req.Subscribe {
			if req.TaskID != "turn-1" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(a2a.AppendError(nil, req.ID, &a2a.Error{Code: a2a.CodeTaskNotFound, Message: "no task " + strconv.Quote(req.TaskID)}))
				return
			}
			enc.Skip(-1)
			for _, ev := range f.prefix { // the task so far, from the compacted log
				enc.Append(nil, parts(ev)...)
			}
			enc.Skip(0)
			b = enc.Task(b, f.half)
			tail = after(f.live, f.half)
		} else {
			b = enc.Task(b, 0)
		}
		for _, ev := range tail {
			b = enc.Append(b, parts(ev)...)
		}
		write(w, b)
	})
	// The Durable Streams route over a bus of its own, and the pointer to
	// a chat's stream that @durable-streams/aisdk-transport reconnects by.
	dbus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, err)
	dh, err := durable.NewHandler(dbus, durable.HandlerOptions{})
	require.NoError(t, err)
	mux.Handle(durable.Pattern, dh)
	mux.HandleFunc("GET /durable/api/chat/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); !dbus.SessionExists(id) && !dbus.SessionClosed(id) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		u := base + durable.Pattern + r.PathValue("id")
		w.Header().Set("Location", u)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"streamUrl": u})
	})
	ts := httptest.NewUnstartedServer(mux)
	base = "http://" + ts.Listener.Addr().String() // before any handler reads it
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		_ = dh.Close()
		_ = dbus.Close()
	})
	return ts
}

// frameEnd returns the end of the n-th SSE frame of b.
func frameEnd(b []byte, n int) int {
	end := 0
	for range n {
		i := bytes.Index(b[end:], []byte("\n\n"))
		if i < 0 {
			return len(b)
		}
		end += i + 2
	}
	return end
}

// uiMessage is the part of ai's UIMessage the test reads.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		State      string          `json:"state"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
		Data       json.RawMessage `json:"data"`
	} `json:"parts"`
}

type aisdkRead struct {
	Message json.RawMessage `json:"message"`
	Chunks  []string        `json:"chunks"`
	Errors  []string        `json:"errors"`
}

// TestAISDKClientReadsTheUIMessageStream: npm ai 7's DefaultChatTransport
// sends a message and reads the stream, validating every chunk against
// its schema, and readUIMessageStream rebuilds the reply: text, reasoning,
// the tool call with its input and output, the plan and the application's
// event as data parts. reconnectToStream gets the same UIMessage from the
// compacted log in far fewer chunks, and null (204) for a chat without an
// active stream.
func TestAISDKClientReadsTheUIMessageStream(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	f := newTurn(t)
	ts := frontendServer(t, f)
	var out struct {
		Send          *aisdkRead `json:"send"`
		Reconnect     *aisdkRead `json:"reconnect"`
		UnknownIsNull bool       `json:"unknownIsNull"`
		Error         string     `json:"error"`
	}
	runNode(t, node, dir, &out, "aisdk.mjs", ts.URL+"/api/chat", "chat-1")
	require.Empty(t, out.Error)
	require.NotNil(t, out.Send)
	require.NotNil(t, out.Reconnect, "reconnectToStream found the active stream")
	assert.True(t, out.UnknownIsNull, "no stream: 204, reconnectToStream returns null")
	assert.Empty(t, out.Send.Errors)
	assert.Empty(t, out.Reconnect.Errors)

	var msg uiMessage
	require.NoError(t, json.Unmarshal(out.Send.Message, &msg))
	assert.Equal(t, "msg-1", msg.ID)
	assert.Equal(t, "assistant", msg.Role)
	var text, reasoning, kinds []string
	for _, p := range msg.Parts {
		kinds = append(kinds, p.Type)
		switch p.Type {
		case "text":
			text = append(text, p.Text)
		case "reasoning":
			reasoning = append(reasoning, p.Text)
		case "dynamic-tool":
			assert.Equal(t, "call-1", p.ToolCallID)
			assert.Equal(t, "read", p.ToolName)
			assert.Equal(t, "output-available", p.State)
			assert.JSONEq(t, `{"path":"a.go"}`, string(p.Input))
			assert.JSONEq(t, `[{"type":"content","content":{"type":"text","text":"package a"}}]`, string(p.Output))
		case "data-plan":
			assert.JSONEq(t, `{"entries":[{"content":"Read the file","priority":"high","status":"in_progress"}]}`, string(p.Data))
		case "data-note":
			assert.JSONEq(t, `{"by":"app"}`, string(p.Data))
		}
	}
	assert.Equal(t, []string{"reasoning", "text", "data-plan", "dynamic-tool", "data-note", "text"}, kinds)
	assert.Equal(t, f.text, strings.Join(text, ""))
	assert.Equal(t, f.thought, strings.Join(reasoning, ""))

	assert.JSONEq(t, string(out.Send.Message), string(out.Reconnect.Message), "the resumed message is the uncut one")
	count := func(cs []string, typ string) (n int) {
		for _, c := range cs {
			if c == typ {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 40, count(out.Send.Chunks, "text-delta"))
	assert.Equal(t, 2, count(out.Reconnect.Chunks, "text-delta"), "one text-delta per block from the compacted log")
	assert.Equal(t, "finish", out.Send.Chunks[len(out.Send.Chunks)-1])
}

type aguiOut struct {
	Runs []struct {
		Events []string `json:"events"`
		Error  *string  `json:"error"`
		LastID string   `json:"lastId"`
	} `json:"runs"`
	Messages  json.RawMessage `json:"messages"`
	Compacted int             `json:"compacted"`
	Warnings  []string        `json:"warnings"`
}

// TestAGUIClientRunsJoinsAndResumes: @ag-ui/client 1.0.0's HttpAgent runs
// the turn through its whole pipeline (schema enforcement, which warns on
// and strips anything unknown; verifyEvents; the reducer) without a
// warning or an error, and ends with the reply, reasoning, tool call and
// result, and the plan as messages. A join at the half-way point
// (RUN_STARTED, MESSAGES_SNAPSHOT, then the tail), and runs cut after
// various frames and resumed with the last id as Last-Event-ID, leave the
// agent with exactly the same messages.
func TestAGUIClientRunsJoinsAndResumes(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	f := newTurn(t)
	ts := frontendServer(t, f)

	var whole aguiOut
	runNode(t, node, dir, &whole, "agui.mjs", ts.URL+"/agui", "s1")
	require.Len(t, whole.Runs, 1)
	require.Nil(t, whole.Runs[0].Error)
	assert.Empty(t, whole.Warnings, "the enforcement stage stripped or dropped nothing")
	ev := whole.Runs[0].Events
	assert.Equal(t, "RUN_STARTED", ev[0])
	assert.Equal(t, "RUN_FINISHED", ev[len(ev)-1])
	assert.Positive(t, whole.Compacted)
	var msgs []struct {
		ID, Role     string
		Content      json.RawMessage
		ToolCallID   string `json:"toolCallId"`
		ActivityType string `json:"activityType"`
	}
	require.NoError(t, json.Unmarshal(whole.Messages, &msgs))
	var roles []string
	var content string
	for _, m := range msgs {
		roles = append(roles, m.Role)
		if m.Role == "assistant" && len(m.Content) > 0 {
			var s string
			require.NoError(t, json.Unmarshal(m.Content, &s))
			content += s
		}
	}
	assert.Equal(t, []string{"reasoning", "assistant", "tool", "activity", "assistant"}, roles)
	assert.Equal(t, f.text, content)

	t.Run("join", func(t *testing.T) {
		var join aguiOut
		runNode(t, node, dir, &join, "agui.mjs", ts.URL+"/agui?join=1", "s1")
		require.Len(t, join.Runs, 1)
		require.Nil(t, join.Runs[0].Error)
		assert.Empty(t, join.Warnings)
		assert.Equal(t, []string{"RUN_STARTED", "MESSAGES_SNAPSHOT"}, join.Runs[0].Events[:2])
		assert.JSONEq(t, string(whole.Messages), string(join.Messages))
	})
	for _, cut := range []int{2, 28, 29, 31, 50} {
		t.Run("cut after "+strconv.Itoa(cut)+" frames", func(t *testing.T) {
			var res aguiOut
			runNode(t, node, dir, &res, "agui.mjs", ts.URL+"/agui?cut="+strconv.Itoa(cut), "s1", "resume")
			require.Len(t, res.Runs, 2, "one cut run, one resumed")
			assert.NotEmpty(t, res.Runs[0].LastID)
			require.Nil(t, res.Runs[1].Error)
			assert.Empty(t, res.Warnings)
			assert.Equal(t, "RUN_FINISHED", res.Runs[1].Events[len(res.Runs[1].Events)-1])
			assert.JSONEq(t, string(whole.Messages), string(res.Messages), "resumed after %s", res.Runs[0].LastID)
		})
	}
}

type a2aEvent struct {
	Case       string `json:"case"`
	ID         string `json:"id"`
	State      string `json:"state"`
	ArtifactID string `json:"artifactId"`
	Append     bool   `json:"append"`
	Parts      []struct {
		Text *string         `json:"text"`
		Data json.RawMessage `json:"data"`
	} `json:"parts"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
		Parts      []struct {
			Text *string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
}

// TestA2AClientStreamsAndResubscribes: @a2a-js/sdk 1.3.0's client reads
// the agent card, streams a message and resubscribes to the task, over
// protocol 1.0 (SendStreamingMessage, SubscribeToTask) and, through its
// compatibility layer, 0.3 (message/stream, tasks/resubscribe): the
// stream starts with the task, works, carries the reply's text as
// appended artifact chunks and ends completed; the resubscription gets
// the task first, holding the reply so far, then the rest, then the
// terminal status.
func TestA2AClientStreamsAndResubscribes(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	f := newTurn(t)
	ts := frontendServer(t, f)
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			var out struct {
				ProtocolVersion string     `json:"protocolVersion"`
				Stream          []a2aEvent `json:"stream"`
				Resubscribe     []a2aEvent `json:"resubscribe"`
				Error           string     `json:"error"`
			}
			runNode(t, node, dir, &out, "a2a.mjs", ts.URL, version)
			require.Empty(t, out.Error)
			assert.Equal(t, version, out.ProtocolVersion, "the client chose the interface of this version")
			textOf := func(evs []a2aEvent) string {
				var b strings.Builder
				for _, e := range evs {
					if e.Case == "task" {
						for _, a := range e.Artifacts {
							if strings.HasPrefix(a.ArtifactID, "text-") {
								for _, p := range a.Parts {
									b.WriteString(*p.Text)
								}
							}
						}
					}
					if e.Case == "artifactUpdate" && strings.HasPrefix(e.ArtifactID, "text-") {
						for _, p := range e.Parts {
							b.WriteString(*p.Text)
						}
					}
				}
				return b.String()
			}
			for name, evs := range map[string][]a2aEvent{"stream": out.Stream, "resubscribe": out.Resubscribe} {
				require.NotEmpty(t, evs, name)
				assert.Equal(t, "task", evs[0].Case, "%s: the task first", name)
				assert.Equal(t, "turn-1", evs[0].ID)
				last := evs[len(evs)-1]
				assert.Equal(t, "statusUpdate", last.Case, name)
				assert.Equal(t, "completed", last.State, name)
				assert.Equal(t, f.text, textOf(evs), "%s: the whole reply", name)
			}
			assert.Equal(t, "submitted", out.Stream[0].State)
			first := out.Resubscribe[0]
			assert.Equal(t, "working", first.State)
			require.NotEmpty(t, first.Artifacts, "the task as it stands")
			assert.Equal(t, 1, len(first.Artifacts[1].Parts), "the reply so far in one part")
		})
	}
}

// TestDurableAISDKTransportOverTheDurableRoute: both halves of
// @durable-streams/aisdk-transport against replaybus's Durable Streams
// route (adapters/durable): its server half writes the UI-message chunks
// of the AI SDK stream into /v1/stream/<chat> and closes it, its client
// half reconnects through the chat's pointer and reads them back over
// Durable Streams SSE; readUIMessageStream rebuilds the same message as
// from the stream itself, and an unknown chat reconnects to nothing.
func TestDurableAISDKTransportOverTheDurableRoute(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	f := newTurn(t)
	ts := frontendServer(t, f)
	var out struct {
		Direct        json.RawMessage `json:"direct"`
		Durable       json.RawMessage `json:"durable"`
		Chunks        int             `json:"chunks"`
		Status        int             `json:"status"`
		UnknownIsNull bool            `json:"unknownIsNull"`
		Error         string          `json:"error"`
	}
	runNode(t, node, dir, &out, "aisdk-durable.mjs", ts.URL, "chat-d")
	require.Empty(t, out.Error)
	assert.Equal(t, http.StatusOK, out.Status)
	assert.Greater(t, out.Chunks, 40)
	require.NotEmpty(t, out.Direct)
	assert.JSONEq(t, string(out.Direct), string(out.Durable), "the message read back through the durable stream")
	assert.True(t, out.UnknownIsNull)
}
