package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
)

// hostileTurn is a turn as a careless or hostile producer publishes it:
// two tool calls interleaved, one with a 200 KB input and its output
// streamed as cumulative content (each update the whole output so far),
// a call still running at the turn's end, an update of a call never
// announced, an ACP type whose payload has
// another shape, event types with spaces, slashes and non-ASCII in their
// names, a payload that is not JSON, and text with multi-byte characters,
// CR, LF and quotes, and a surrogate pair split between two chunks.
func hostileTurn(t *testing.T) *turnFixture {
	t.Helper()
	return recordTurn(t, func(bus *eventbus.Bus, f *turnFixture, pub func(acp.Update)) {
		must := func(_ eventbus.Event, err error) { require.NoError(t, err) }
		turn, err := bus.StartTurn(context.Background(), "s1", eventbus.TurnOptions{ID: "turn-1"})
		require.NoError(t, err)
		say := func(from, to int) {
			for i := from; i < to; i++ {
				s := fmt.Sprintf("中文 é😀 \"q\"\r\n<%d> ", i)
				f.text += s
				pub(acp.MessageChunk(s))
			}
		}
		f.thought = "hm\u2028"
		pub(acp.ThoughtChunk(f.thought))
		say(0, 30)
		big := map[string]string{"blob": strings.Repeat("ü", 100_000)}
		pub(acp.ToolCall{ToolCallID: "call-a", Title: "Big", Kind: "edit", Status: acp.StatusPending, RawInput: big})
		pub(acp.ToolCall{ToolCallID: "call-b", Title: "Other", Kind: "search", Status: acp.StatusPending})
		out := ""
		for i := range 4 {
			out += "line " + strconv.Itoa(i) + "\n"
			pub(acp.ToolCallUpdate{ToolCallID: "call-a", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TextContent(out)}})
		}
		f.prefix = replayed(t, bus)
		f.half = f.prefix[len(f.prefix)-1].ID
		pub(acp.ToolCallUpdate{ToolCallID: "call-b", Status: acp.StatusFailed})
		pub(acp.ToolCallUpdate{ToolCallID: "ghost", Status: acp.StatusCompleted, RawOutput: map[string]int{"n": 1}})
		pub(acp.ToolCallUpdate{ToolCallID: "call-a", Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent(out)}})
		// An input restated after the output (the call's state must not
		// go back to input-available without its output).
		pub(acp.ToolCallUpdate{ToolCallID: "call-a", RawInput: map[string]bool{"late": true}})
		// A call still running when the turn ends: its output so far is
		// the last update's content (ACP: an update's content replaces).
		pub(acp.ToolCall{ToolCallID: "call-c", Title: "Tail", Kind: "execute", Status: acp.StatusPending})
		for _, o := range []string{"a", "ab", "abc"} {
			pub(acp.ToolCallUpdate{ToolCallID: "call-c", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TextContent(o)}})
		}
		must(bus.Publish("s1", acp.TypeToolCall, map[string]any{"update": 5}))
		must(bus.Publish("s1", "weird type/é x", map[string]string{"k": "v"}))
		must(bus.PublishBytes("s1", "raw", "application/octet-stream", []byte{0, 0xff, '\n'}))
		// A character a UTF-16 producer cut between two chunks' \u
		// escapes: one 😀, not two U+FFFD (codec.TextJoin, coalesce).
		for _, lit := range []string{`"\ud83d"`, `"\ude00"`} {
			must(bus.PublishJSON("s1", acp.TypeMessageChunk, []byte(
				`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":`+lit+`}}}`)))
		}
		f.text += "😀"
		say(30, 60)
		must(turn.End(nil))
	})
}

// TestFrontendClientsReadAHostileTurn: the three protocols' real clients
// read hostileTurn through codec and the encoders without a schema error,
// a warning or a lost part: npm ai rebuilds the same UIMessage from the
// live stream and from the compacted log, @ag-ui/client the same messages
// whole, joined and resumed after a cut, and @a2a-js/sdk streams and
// resubscribes to a completed task carrying the whole reply.
func TestFrontendClientsReadAHostileTurn(t *testing.T) {
	t.Parallel()
	node, dir := needFrontends(t)
	f := hostileTurn(t)
	ts := frontendServer(t, f)

	t.Run("ai", func(t *testing.T) {
		var out struct {
			Send, Reconnect *aisdkRead
			Error           string
		}
		runNode(t, node, dir, &out, "aisdk.mjs", ts.URL+"/api/chat", "chat-1")
		require.Empty(t, out.Error)
		require.NotNil(t, out.Send)
		require.NotNil(t, out.Reconnect)
		assert.Empty(t, out.Send.Errors)
		assert.Empty(t, out.Reconnect.Errors)
		assert.JSONEq(t, string(out.Send.Message), string(out.Reconnect.Message), "the resumed message is the uncut one")
		var msg uiMessage
		require.NoError(t, json.Unmarshal(out.Send.Message, &msg))
		var text string
		tools := map[string]string{}
		data := 0
		for _, p := range msg.Parts {
			switch {
			case p.Type == "text":
				text += p.Text
			case p.Type == "dynamic-tool":
				tools[p.ToolCallID] = p.State
			case strings.HasPrefix(p.Type, "data-"):
				data++
			}
		}
		assert.Equal(t, f.text, text)
		assert.Equal(t, map[string]string{"call-a": "output-available", "call-b": "output-error", "call-c": "output-available", "ghost": "output-available"}, tools)
		assert.Equal(t, 4, data, "the late input, the misshapen tool_call, the odd type, the bytes")
	})
	t.Run("ag-ui", func(t *testing.T) {
		var whole aguiOut
		runNode(t, node, dir, &whole, "agui.mjs", ts.URL+"/agui", "s1")
		require.Len(t, whole.Runs, 1)
		require.Nil(t, whole.Runs[0].Error)
		assert.Empty(t, whole.Warnings)
		ev := whole.Runs[0].Events
		assert.Equal(t, "RUN_FINISHED", ev[len(ev)-1])
		var join aguiOut
		runNode(t, node, dir, &join, "agui.mjs", ts.URL+"/agui?join=1", "s1")
		require.Len(t, join.Runs, 1)
		require.Nil(t, join.Runs[0].Error)
		assert.Empty(t, join.Warnings)
		assert.JSONEq(t, string(whole.Messages), string(join.Messages), "joined")
		for _, cut := range []int{3, 40, 45} {
			var res aguiOut
			runNode(t, node, dir, &res, "agui.mjs", ts.URL+"/agui?cut="+strconv.Itoa(cut), "s1", "resume")
			require.Len(t, res.Runs, 2, "one cut run, one resumed")
			require.Nil(t, res.Runs[1].Error)
			assert.Empty(t, res.Warnings)
			assert.JSONEq(t, string(whole.Messages), string(res.Messages), "resumed after %s", res.Runs[0].LastID)
		}
	})
	for _, version := range []string{"1.0", "0.3"} {
		t.Run("a2a "+version, func(t *testing.T) {
			var out struct {
				Stream      []a2aEvent `json:"stream"`
				Resubscribe []a2aEvent `json:"resubscribe"`
				Error       string     `json:"error"`
			}
			runNode(t, node, dir, &out, "a2a.mjs", ts.URL, version)
			require.Empty(t, out.Error)
			for name, evs := range map[string][]a2aEvent{"stream": out.Stream, "resubscribe": out.Resubscribe} {
				require.NotEmpty(t, evs, name)
				assert.Equal(t, "task", evs[0].Case, "%s: the task first", name)
				last := evs[len(evs)-1]
				assert.Equal(t, "completed", last.State, name)
				var b strings.Builder
				for _, e := range evs {
					for _, a := range e.Artifacts {
						if strings.HasPrefix(a.ArtifactID, "text-") {
							for _, p := range a.Parts {
								b.WriteString(*p.Text)
							}
						}
					}
					if e.Case == "artifactUpdate" && strings.HasPrefix(e.ArtifactID, "text-") {
						for _, p := range e.Parts {
							b.WriteString(*p.Text)
						}
					}
				}
				assert.Equal(t, f.text, b.String(), "%s: the whole reply", name)
			}
		})
	}
}
