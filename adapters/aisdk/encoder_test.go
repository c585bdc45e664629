package aisdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// chunks decodes a stream into its data lines.
func chunks(t require.TestingT, b []byte) []string {
	d := sse.NewDecoder(bytes.NewReader(b))
	var out []string
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		assert.False(t, f.HasID, "the UI-message stream carries no ids")
		out = append(out, string(f.Data))
	}
}

func TestEncoderWritesTheChunksOfATurn(t *testing.T) {
	t.Parallel()
	parts := []codec.Part{
		{Kind: codec.Start, ID: 1, Turn: "t1"},
		{Kind: codec.Reasoning, ID: 2, Text: "Look."},
		{Kind: codec.Text, ID: 3, Text: "Hel"},
		{Kind: codec.Text, ID: 4, Text: "lo"},
		{Kind: codec.ToolInputStart, ID: 5, ToolCallID: "c1", ToolName: "read", Title: "Read a.go"},
		{Kind: codec.ToolInput, ID: 5, ToolCallID: "c1", ToolName: "read", Title: "Read a.go", Input: json.RawMessage(`{"path":"a.go"}`)},
		{Kind: codec.ToolOutput, ID: 6, ToolCallID: "c1", Output: json.RawMessage(`"package a"`), Preliminary: true},
		{Kind: codec.ToolOutput, ID: 7, ToolCallID: "c1", Output: json.RawMessage(`"package a\n"`)},
		{Kind: codec.ToolInputDelta, ID: 8, ToolCallID: "c2", Text: `{"q":`},
		{Kind: codec.ToolError, ID: 9, ToolCallID: "c2", Text: "denied"},
		{Kind: codec.ToolOutput, ID: 10, ToolCallID: "c3", Output: json.RawMessage(`1`)},
		{Kind: codec.Plan, ID: 11, Data: json.RawMessage(`{"entries":[]}`)},
		{Kind: codec.Text, ID: 20, FirstID: 12, Text: "Done."},
		{Kind: codec.Data, ID: 21, Name: "note", Data: json.RawMessage(`{"by":"app"}`)},
		{Kind: codec.Finish, ID: 22, Turn: "t1", Reason: codec.ReasonComplete},
		{Kind: codec.Text, ID: 23, Text: "after the end"},
	}
	enc := aisdk.NewEncoder("m1")
	got := chunks(t, enc.Append(nil, parts...))
	assert.Equal(t, []string{
		`{"type":"start","messageId":"m1"}`,
		`{"type":"reasoning-start","id":"reasoning-2"}`,
		`{"type":"reasoning-delta","id":"reasoning-2","delta":"Look."}`,
		`{"type":"reasoning-end","id":"reasoning-2"}`,
		`{"type":"text-start","id":"text-3"}`,
		`{"type":"text-delta","id":"text-3","delta":"Hel"}`,
		`{"type":"text-delta","id":"text-3","delta":"lo"}`,
		`{"type":"text-end","id":"text-3"}`,
		`{"type":"tool-input-start","toolCallId":"c1","toolName":"read","dynamic":true,"title":"Read a.go"}`,
		`{"type":"tool-input-available","toolCallId":"c1","toolName":"read","input":{"path":"a.go"},"dynamic":true,"title":"Read a.go"}`,
		`{"type":"tool-output-available","toolCallId":"c1","output":"package a","dynamic":true,"preliminary":true}`,
		`{"type":"tool-output-available","toolCallId":"c1","output":"package a\n","dynamic":true}`,
		`{"type":"tool-input-start","toolCallId":"c2","toolName":"tool","dynamic":true}`,
		`{"type":"tool-input-delta","toolCallId":"c2","inputTextDelta":"{\"q\":"}`,
		`{"type":"tool-output-error","toolCallId":"c2","errorText":"denied","dynamic":true}`,
		`{"type":"tool-input-available","toolCallId":"c3","toolName":"tool","input":{},"dynamic":true}`,
		`{"type":"tool-output-available","toolCallId":"c3","output":1,"dynamic":true}`,
		`{"type":"data-plan","id":"plan","data":{"entries":[]}}`,
		`{"type":"text-start","id":"text-12"}`,
		`{"type":"text-delta","id":"text-12","delta":"Done."}`,
		`{"type":"text-end","id":"text-12"}`,
		`{"type":"data-note","id":"21","data":{"by":"app"}}`,
		`{"type":"finish","finishReason":"stop"}`,
		`[DONE]`,
	}, got)
	assert.True(t, enc.Done())
}

func TestFinishByReason(t *testing.T) {
	t.Parallel()
	rows := []struct {
		reason, message string
		want            []string
	}{
		{codec.ReasonComplete, "", []string{`{"type":"finish","finishReason":"stop"}`}},
		{codec.ReasonCancelled, "", []string{`{"type":"abort","reason":"cancelled"}`}},
		{codec.ReasonError, "quota", []string{`{"type":"error","errorText":"quota"}`, `{"type":"finish","finishReason":"error"}`}},
		{codec.ReasonProducerLost, "", []string{`{"type":"error","errorText":"producer_lost"}`, `{"type":"finish","finishReason":"error"}`}},
	}
	for _, r := range rows {
		enc := aisdk.NewEncoder("")
		b := enc.Append(nil, codec.Part{Kind: codec.Text, ID: 1, Text: "partial"})
		b = enc.Finish(b, r.reason, r.message)
		b = enc.Finish(b, codec.ReasonComplete, "") // once
		want := append([]string{`{"type":"start"}`, `{"type":"text-start","id":"text-1"}`,
			`{"type":"text-delta","id":"text-1","delta":"partial"}`, `{"type":"text-end","id":"text-1"}`}, r.want...)
		assert.Equal(t, append(want, "[DONE]"), chunks(t, b), r.reason)
	}
}

func TestSetHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	aisdk.SetHeaders(h)
	assert.Equal(t, "v1", h.Get("x-vercel-ai-ui-message-stream"))
	assert.Equal(t, "text/event-stream", h.Get("Content-Type"))
}

// check runs the rules of ai 7's processUIMessageStream over a chunk
// sequence: a delta or end only for an open block, a tool input delta
// only after its start, an output only for a known tool call, no input
// chunk for a call whose input is whole or that has an output (the client
// takes the call back to input-streaming or input-available and drops its
// output), a start first, exactly one terminal chunk, [DONE] last.
func check(cs []string) error {
	open := map[string]bool{}
	partial, known := map[string]bool{}, map[string]bool{}
	whole, output := map[string]bool{}, map[string]bool{}
	ended := false
	for i, c := range cs {
		if c == "[DONE]" {
			if i != len(cs)-1 || !ended {
				return fmt.Errorf("[DONE] at %d of %d, ended %v", i, len(cs), ended)
			}
			continue
		}
		var ch struct{ Type, ID, ToolCallID string }
		if err := json.Unmarshal([]byte(c), &ch); err != nil {
			return err
		}
		if ended {
			return fmt.Errorf("%s after the end", c)
		}
		if (i == 0) != (ch.Type == "start") {
			return fmt.Errorf("start at %d", i)
		}
		kind, phase, _ := strings.Cut(ch.Type, "-")
		switch {
		case (kind == "text" || kind == "reasoning") && phase == "start":
			open[ch.ID] = true
		case (kind == "text" || kind == "reasoning") && (phase == "delta" || phase == "end"):
			if !open[ch.ID] {
				return fmt.Errorf("%s without its start", c)
			}
			if phase == "end" {
				delete(open, ch.ID)
			}
		case strings.HasPrefix(ch.Type, "tool-input") && output[ch.ToolCallID]:
			return fmt.Errorf("%s after the call's output", c)
		case ch.Type == "tool-input-start":
			partial[ch.ToolCallID], known[ch.ToolCallID] = true, true
		case ch.Type == "tool-input-delta":
			if !partial[ch.ToolCallID] {
				return fmt.Errorf("%s without its start", c)
			}
			if whole[ch.ToolCallID] {
				return fmt.Errorf("%s after the call's whole input", c)
			}
		case ch.Type == "tool-input-available":
			known[ch.ToolCallID], whole[ch.ToolCallID] = true, true
		case strings.HasPrefix(ch.Type, "tool-output"):
			if !known[ch.ToolCallID] {
				return fmt.Errorf("%s for an unknown tool call", c)
			}
			output[ch.ToolCallID] = true
		case ch.Type == "finish" || ch.Type == "abort":
			ended = true
		}
	}
	if len(open) > 0 || !ended {
		return fmt.Errorf("open blocks %v, ended %v", open, ended)
	}
	return nil
}

// Whatever parts arrive, in whatever order, the stream obeys the client's
// rules.
func TestPropertyStreamsObeyTheClientsRules(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		enc := aisdk.NewEncoder("m")
		var b []byte
		n := rapid.IntRange(0, 40).Draw(t, "n")
		for i := range n {
			p := codec.Part{
				Kind:       codec.Kind(rapid.IntRange(1, 11).Draw(t, "kind")),
				ID:         uint64(i + 1),
				Session:    rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "session"),
				ToolCallID: rapid.SampledFrom([]string{"c1", "c2", "c3"}).Draw(t, "call"),
				Text:       rapid.SampledFrom([]string{"", "x", "y z"}).Draw(t, "text"),
			}
			b = enc.Append(b, p)
		}
		b = enc.Finish(b, rapid.SampledFrom([]string{codec.ReasonComplete, codec.ReasonCancelled, codec.ReasonError}).Draw(t, "reason"), "")
		if err := check(chunks(t, b)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestALateToolInputKeepsTheOutput: an input that arrives for a tool call
// after its output (a restated rawInput, a stray delta) is passed on as a
// data part: a tool-input-available or tool-input-delta there takes the
// call back to input-available or input-streaming in the client and drops
// the output it showed.
func TestALateToolInputKeepsTheOutput(t *testing.T) {
	t.Parallel()
	enc := aisdk.NewEncoder("m")
	got := chunks(t, enc.Append(nil,
		codec.Part{Kind: codec.ToolInputStart, ID: 1, ToolCallID: "c", ToolName: "read"},
		codec.Part{Kind: codec.ToolInputDelta, ID: 2, ToolCallID: "c", Text: `{"a":`},
		codec.Part{Kind: codec.ToolInput, ID: 3, ToolCallID: "c", Input: json.RawMessage(`{"a":1}`)},
		codec.Part{Kind: codec.ToolInputDelta, ID: 4, ToolCallID: "c", Text: `1}`},
		codec.Part{Kind: codec.ToolOutput, ID: 5, ToolCallID: "c", Output: json.RawMessage(`"ok"`)},
		codec.Part{Kind: codec.ToolInput, ID: 6, ToolCallID: "c", Input: json.RawMessage(`{"a":2}`)},
		codec.Part{Kind: codec.Finish, ID: 7, Reason: codec.ReasonComplete},
	))
	assert.Equal(t, []string{
		`{"type":"start","messageId":"m"}`,
		`{"type":"tool-input-start","toolCallId":"c","toolName":"read","dynamic":true}`,
		`{"type":"tool-input-delta","toolCallId":"c","inputTextDelta":"{\"a\":"}`,
		`{"type":"tool-input-available","toolCallId":"c","toolName":"read","input":{"a":1},"dynamic":true}`,
		`{"type":"data-tool-input-delta","data":{"delta":"1}","toolCallId":"c"}}`,
		`{"type":"tool-output-available","toolCallId":"c","output":"ok","dynamic":true}`,
		`{"type":"data-tool-input","data":{"toolCallId":"c","input":{"a":2}}}`,
		`{"type":"finish","finishReason":"stop"}`,
		`[DONE]`,
	}, got)
	require.NoError(t, check(got))
}

// A surrogate pair that an ACP producer split across two text chunks
// ("\ud83d" then "\ude00") is one 😀 in the UI-message stream: the first
// half waits for the second (no delta for it alone), and a half that no
// partner follows is U+FFFD when the block ends. Each delta was U+FFFD.
func TestASplitSurrogatePairIsOneCharacter(t *testing.T) {
	t.Parallel()
	chunk := func(id uint64, lit string) []codec.Part {
		ev := eventbus.Event{ID: id, Session: "s1", Type: "agent_message_chunk", Data: []byte(
			`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + lit + `}}}`)}
		return codec.Default.Decode(nil, ev)
	}
	enc := aisdk.NewEncoder("m1")
	var b []byte
	b = enc.Append(b, chunk(1, `"a \ud83d"`)...)
	b = enc.Append(b, chunk(2, `"\ude00 b \ud83d"`)...)
	b = enc.Finish(b, aisdk.FinishStop, "")
	var text strings.Builder
	for _, c := range chunks(t, b) {
		if c == "[DONE]" {
			continue
		}
		var v struct{ Type, Delta string }
		require.NoError(t, json.Unmarshal([]byte(c), &v))
		if v.Type == "text-delta" {
			text.WriteString(v.Delta)
		}
	}
	assert.Equal(t, "a 😀 b \uFFFD", text.String())
}
