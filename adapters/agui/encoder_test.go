package agui_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
)

type frame struct {
	id   string
	data string
}

func frames(t require.TestingT, b []byte) []frame {
	d := sse.NewDecoder(bytes.NewReader(b))
	var out []frame
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		id := ""
		if f.HasID {
			id = f.ID
		}
		out = append(out, frame{id, string(f.Data)})
	}
}

var opts = agui.Options{ThreadID: "th", RunID: "r1", Epoch: "ep"}

func TestEncoderWritesTheEventsOfARun(t *testing.T) {
	t.Parallel()
	enc := agui.NewEncoder(opts)
	var b []byte
	for _, ps := range [][]codec.Part{
		{{Kind: codec.Start, ID: 1, Turn: "r1"}},
		{{Kind: codec.Reasoning, ID: 2, Text: "Look."}},
		{{Kind: codec.Text, ID: 3, Text: "Hel"}},
		{{Kind: codec.Text, ID: 4, Text: "lo"}},
		{{Kind: codec.ToolInputStart, ID: 5, ToolCallID: "c1", ToolName: "read"},
			{Kind: codec.ToolInput, ID: 5, ToolCallID: "c1", Input: json.RawMessage(`{"path":"a.go"}`)}},
		{{Kind: codec.ToolOutput, ID: 6, ToolCallID: "c1", Text: "package a", Output: json.RawMessage(`[]`)}},
		{{Kind: codec.Plan, ID: 7, Data: json.RawMessage(`{"entries":[]}`)}},
		{{Kind: codec.Data, ID: 8, Name: "note", Data: json.RawMessage(`{"by":"app"}`)}},
		{{Kind: codec.Finish, ID: 9, Reason: codec.ReasonComplete}},
	} {
		b = enc.Append(b, ps...)
	}
	assert.Equal(t, []frame{
		{"ep-1", `{"runId":"r1","threadId":"th","type":"RUN_STARTED"}`},
		{"ep-2:0", `{"messageId":"r1-reasoning-2","type":"REASONING_START"}`},
		{"ep-2:1", `{"messageId":"r1-reasoning-2","role":"reasoning","type":"REASONING_MESSAGE_START"}`},
		{"ep-2", `{"delta":"Look.","messageId":"r1-reasoning-2","type":"REASONING_MESSAGE_CONTENT"}`},
		{"ep-3:0", `{"messageId":"r1-reasoning-2","type":"REASONING_MESSAGE_END"}`},
		{"ep-3:1", `{"messageId":"r1-reasoning-2","type":"REASONING_END"}`},
		{"ep-3:2", `{"messageId":"r1-text-3","role":"assistant","type":"TEXT_MESSAGE_START"}`},
		{"ep-3", `{"delta":"Hel","messageId":"r1-text-3","type":"TEXT_MESSAGE_CONTENT"}`},
		{"ep-4", `{"delta":"lo","messageId":"r1-text-3","type":"TEXT_MESSAGE_CONTENT"}`},
		{"ep-5:0", `{"messageId":"r1-text-3","type":"TEXT_MESSAGE_END"}`},
		{"ep-5:1", `{"parentMessageId":"r1-text-3","toolCallId":"c1","toolCallName":"read","type":"TOOL_CALL_START"}`},
		{"ep-5:2", `{"delta":"{\"path\":\"a.go\"}","toolCallId":"c1","type":"TOOL_CALL_ARGS"}`},
		{"ep-5", `{"toolCallId":"c1","type":"TOOL_CALL_END"}`},
		{"ep-6", `{"content":"package a","messageId":"r1-result-c1","role":"tool","toolCallId":"c1","type":"TOOL_CALL_RESULT"}`},
		{"ep-7", `{"activityType":"plan","content":{"entries":[]},"messageId":"r1-plan","replace":true,"type":"ACTIVITY_SNAPSHOT"}`},
		{"ep-8", `{"name":"note","type":"CUSTOM","value":{"by":"app"}}`},
		{"ep-9", `{"outcome":{"type":"success"},"runId":"r1","threadId":"th","type":"RUN_FINISHED"}`},
	}, frames(t, b))
	msgs, err := json.Marshal(enc.Messages())
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"id":"r1-reasoning-2","role":"reasoning","content":"Look."},
		{"id":"r1-text-3","role":"assistant","content":"Hello","toolCalls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.go\"}"}}]},
		{"id":"r1-result-c1","role":"tool","content":"package a","toolCallId":"c1"},
		{"id":"r1-plan","role":"activity","activityType":"plan","content":{"entries":[]}}]`, string(msgs))
}

func TestFinishByReason(t *testing.T) {
	t.Parallel()
	rows := []struct{ reason, message, want string }{
		{codec.ReasonComplete, "", `{"outcome":{"type":"success"},"runId":"r1","threadId":"th","type":"RUN_FINISHED"}`},
		{codec.ReasonCancelled, "", `{"code":"cancelled","message":"the run was cancelled","type":"RUN_ERROR"}`},
		{codec.ReasonError, "quota", `{"code":"error","message":"quota","type":"RUN_ERROR"}`},
		{codec.ReasonProducerLost, "", `{"code":"producer_lost","message":"producer_lost","type":"RUN_ERROR"}`},
	}
	for _, r := range rows {
		enc := agui.NewEncoder(agui.Options{ThreadID: "th", RunID: "r1"})
		b := enc.Append(nil, codec.Part{Kind: codec.ToolInputDelta, ID: 1, ToolCallID: "c1", Text: "{"})
		b = enc.Finish(b, 2, r.reason, r.message)
		b = enc.Finish(b, 3, codec.ReasonComplete, "")
		fs := frames(t, b)
		require.Len(t, fs, 5, r.reason)
		assert.Equal(t, frame{"2:0", `{"toolCallId":"c1","type":"TOOL_CALL_END"}`}, fs[3], "open tool calls end first")
		assert.Equal(t, frame{"2", r.want}, fs[4])
	}
}

// verifier holds the rules of @ag-ui/client 1.0.0's verifyEvents for the
// events this package writes, and the messages its reducer builds.
type verifier struct {
	started, ended         bool
	text, tools            map[string]bool
	spans, reasoning       map[string]bool
	content, args, results map[string]string
}

func newVerifier() *verifier {
	return &verifier{text: map[string]bool{}, tools: map[string]bool{}, spans: map[string]bool{}, reasoning: map[string]bool{},
		content: map[string]string{}, args: map[string]string{}, results: map[string]string{}}
}

// connect starts a new connection: the client's verifier starts afresh,
// its messages stay.
func (v *verifier) connect() {
	v.started, v.ended = false, false
	for _, m := range []map[string]bool{v.text, v.tools, v.spans, v.reasoning} {
		clear(m)
	}
}

func (v *verifier) apply(data string) error {
	var e struct {
		Type, MessageID, ToolCallID, Delta string
		Content                            json.RawMessage
	}
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return err
	}
	if v.ended {
		return fmt.Errorf("%s after the run ended", e.Type)
	}
	if !v.started && e.Type != "RUN_STARTED" {
		return fmt.Errorf("first event %s", e.Type)
	}
	need := func(m map[string]bool, id string) error {
		if !m[id] {
			return fmt.Errorf("%s for %q, not open", e.Type, id)
		}
		return nil
	}
	switch e.Type {
	case "RUN_STARTED":
		if v.started {
			return errors.New("RUN_STARTED twice")
		}
		v.started = true
	case "TEXT_MESSAGE_START":
		if v.text[e.MessageID] {
			return errors.New("text open twice")
		}
		v.text[e.MessageID] = true
	case "TEXT_MESSAGE_CONTENT":
		v.content[e.MessageID] += e.Delta
		return need(v.text, e.MessageID)
	case "TEXT_MESSAGE_END":
		defer delete(v.text, e.MessageID)
		return need(v.text, e.MessageID)
	case "REASONING_START":
		v.spans[e.MessageID] = true
	case "REASONING_MESSAGE_START":
		v.reasoning[e.MessageID] = true
	case "REASONING_MESSAGE_CONTENT":
		v.content[e.MessageID] += e.Delta
		return need(v.reasoning, e.MessageID)
	case "REASONING_MESSAGE_END":
		defer delete(v.reasoning, e.MessageID)
		return need(v.reasoning, e.MessageID)
	case "REASONING_END":
		defer delete(v.spans, e.MessageID)
		return need(v.spans, e.MessageID)
	case "TOOL_CALL_START":
		if v.tools[e.ToolCallID] {
			return errors.New("tool call open twice")
		}
		v.tools[e.ToolCallID] = true
	case "TOOL_CALL_ARGS":
		v.args[e.ToolCallID] += e.Delta
		return need(v.tools, e.ToolCallID)
	case "TOOL_CALL_END":
		defer delete(v.tools, e.ToolCallID)
		return need(v.tools, e.ToolCallID)
	case "TOOL_CALL_RESULT":
		v.results[e.ToolCallID] = string(e.Content)
	case "RUN_FINISHED":
		for _, m := range []map[string]bool{v.text, v.tools, v.spans, v.reasoning} {
			if len(m) > 0 {
				return fmt.Errorf("RUN_FINISHED with %v open", m)
			}
		}
		v.ended = true
	case "RUN_ERROR":
		v.ended = true
	}
	return nil
}

func drawEvents(t *rapid.T) [][]codec.Part {
	n := rapid.IntRange(1, 30).Draw(t, "events")
	evs := make([][]codec.Part, n)
	for i := range evs {
		id := uint64(i + 1)
		for range rapid.IntRange(1, 3).Draw(t, "parts") {
			evs[i] = append(evs[i], codec.Part{
				Kind:       codec.Kind(rapid.IntRange(1, 11).Draw(t, "kind")),
				ID:         id,
				Session:    rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "session"),
				ToolCallID: rapid.SampledFrom([]string{"c1", "c2"}).Draw(t, "call"),
				Text:       rapid.SampledFrom([]string{"", "x", "{\"a\":"}).Draw(t, "text"),
				Output:     json.RawMessage(`1`),
				Reason:     rapid.SampledFrom([]string{codec.ReasonComplete, codec.ReasonCancelled, codec.ReasonError}).Draw(t, "reason"),
			})
		}
	}
	return evs
}

// Whatever the parts, every stream passes the client's verifier, and the
// last frame of each event carries the plain cursor.
func TestPropertyStreamsPassTheVerifier(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		enc := agui.NewEncoder(opts)
		v := newVerifier()
		for _, ps := range drawEvents(t) {
			fs := frames(t, enc.Append(nil, ps...))
			for i, f := range fs {
				if err := v.apply(f.data); err != nil {
					t.Fatal(err)
				}
				want := "ep-" + strconv.FormatUint(ps[0].ID, 10)
				if i < len(fs)-1 {
					want += ":" + strconv.Itoa(i)
				}
				if f.id != want {
					t.Fatalf("frame %d of event %d has id %q, want %q", i, ps[0].ID, f.id, want)
				}
			}
		}
		fs := frames(t, enc.Finish(nil, 99, codec.ReasonComplete, ""))
		for _, f := range fs {
			if err := v.apply(f.data); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A stream cut after any frame and resumed from that frame's id
// (priming, Skip, Reattach) passes the verifier on the new connection and
// leaves the client with the messages of the uncut stream: no delta lost,
// none twice.
func TestPropertyResumeAfterAnyFrameIsExact(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		evs := drawEvents(t)
		whole := newVerifier()
		var all []frame
		enc := agui.NewEncoder(opts)
		for _, ps := range evs {
			all = append(all, frames(t, enc.Append(nil, ps...))...)
		}
		all = append(all, frames(t, enc.Finish(nil, 99, codec.ReasonComplete, ""))...)
		for _, f := range all {
			if err := whole.apply(f.data); err != nil {
				t.Fatal(err)
			}
		}
		cut := rapid.IntRange(0, len(all)-1).Draw(t, "cut")
		v := newVerifier()
		for _, f := range all[:cut+1] {
			if err := v.apply(f.data); err != nil {
				t.Fatal(err)
			}
		}
		if v.ended {
			return // nothing to resume
		}
		cursor := all[cut].id
		seq, k, mid := strings.Cut(strings.TrimPrefix(cursor, "ep-"), ":")
		n, _ := strconv.ParseUint(seq, 10, 64)
		skip, _ := strconv.Atoi(k)

		enc = agui.NewEncoder(opts)
		enc.Skip(-1)
		var b []byte
		for _, ps := range evs {
			if ps[0].ID < n || ps[0].ID == n && !mid {
				b = enc.Append(b, ps...)
			}
		}
		require.Empty(t, b, "priming writes nothing")
		enc.Skip(0)
		if mid {
			enc.Skip(skip + 1)
		}
		b = enc.Reattach(b, cursor, false)
		for _, ps := range evs {
			if ps[0].ID > n || ps[0].ID == n && mid {
				b = enc.Append(b, ps...)
			}
		}
		b = enc.Finish(b, 99, codec.ReasonComplete, "")
		v.connect()
		for _, f := range frames(t, b) {
			if err := v.apply(f.data); err != nil {
				t.Fatalf("resumed after %s: %v", cursor, err)
			}
		}
		if fmt.Sprint(v.content, v.args, v.results) != fmt.Sprint(whole.content, whole.args, whole.results) {
			t.Fatalf("resumed after %s: %v %v %v, uncut %v %v %v", cursor, v.content, v.args, v.results, whole.content, whole.args, whole.results)
		}
	})
}

// A join without cursor: RUN_STARTED, the messages so far, and the open
// message started again, so the tail continues it.
func TestReattachWithSnapshot(t *testing.T) {
	t.Parallel()
	enc := agui.NewEncoder(opts)
	enc.Skip(-1)
	enc.Append(nil, codec.Part{Kind: codec.Text, ID: 3, FirstID: 1, Text: "Hello, wor"})
	enc.Skip(0)
	b := enc.Reattach(nil, "ep-3", true)
	b = enc.Append(b, codec.Part{Kind: codec.Text, ID: 4, Text: "ld"})
	assert.Equal(t, []frame{
		{"ep-3", `{"runId":"r1","threadId":"th","type":"RUN_STARTED"}`},
		{"ep-3", `{"messages":[{"id":"r1-text-1","role":"assistant","content":"Hello, wor"}],"type":"MESSAGES_SNAPSHOT"}`},
		{"ep-3", `{"messageId":"r1-text-1","role":"assistant","type":"TEXT_MESSAGE_START"}`},
		{"ep-4", `{"delta":"ld","messageId":"r1-text-1","type":"TEXT_MESSAGE_CONTENT"}`},
	}, frames(t, b))
}
