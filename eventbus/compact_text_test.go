package eventbus_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// partsOnly hides a rule set's TextCoalescer side: a bus compacting with
// it keeps every folded event's payload and asks Key for every event (how
// every rule set compacted before text folds).
type partsOnly struct{ eventbus.Coalescer }

// textLit draws the JSON text of a delta's text: plain, with escapes
// (quotes, backslashes, a lone surrogate half of a pair split across two
// deltas, a \u escape of a character also sent raw), non-ASCII, null.
func textLit(t *rapid.T, i int) string {
	switch rapid.IntRange(0, 9).Draw(t, "text kind") {
	case 0:
		return `"a \"quoted\" \\ word\n"`
	case 1:
		return `"\ud83d"` // half of 😀; the next may be `"\ude00"`
	case 2:
		return `"\ude00"`
	case 3:
		return `"\u00e9 é"`
	case 4:
		return "null"
	case 5:
		return `""`
	}
	return strconv.Quote("tok" + strconv.Itoa(i) + " ")
}

// acpDelta draws an ACP update's JSON text, a chunk most of the time, in
// the shapes text folds must tell apart: another sessionId or messageId
// or a field after the text (a different envelope), spaces, the text absent, null or repeated (the
// last one counts), content of another type (not merged), and the other
// types' updates.
func acpDelta(t *rapid.T, i int) (typ, data string) {
	typ = rapid.SampledFrom([]string{chunkType, chunkType, chunkType, "agent_thought_chunk", "tool_call_update", "plan"}).Draw(t, "type")
	switch typ {
	case "tool_call_update":
		return typ, `{"update":{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"in_progress","content":[{"type":"content","text":"` + strconv.Itoa(i) + `"}]}}`
	case "plan":
		return typ, `{"update":{"sessionUpdate":"plan","entries":[` + strconv.Itoa(i) + `]}}`
	}
	var head string
	switch rapid.IntRange(0, 3).Draw(t, "envelope") {
	case 1:
		head = `"sessionId":"s` + strconv.Itoa(rapid.IntRange(0, 1).Draw(t, "sid")) + `",`
	case 2:
		head = `"messageId":"m` + strconv.Itoa(rapid.IntRange(0, 1).Draw(t, "mid")) + `",`
	}
	text := `"text":` + textLit(t, i)
	switch rapid.IntRange(0, 9).Draw(t, "text field") {
	case 0:
		text = `"text":"dup",` + text // the last one counts
	case 1:
		text = `"other":1`
	case 2:
		text = `"text" : ` + textLit(t, i) + ` `
	}
	switch n := rapid.IntRange(0, 2).Draw(t, "after text"); n { // a field after the text
	case 1, 2:
		text += `,"annotations":` + strconv.Itoa(n)
	}
	ctype := `"text"`
	if rapid.IntRange(0, 9).Draw(t, "image") == 0 {
		ctype = `"image"`
	}
	return typ, `{` + head + `"update":{"sessionUpdate":"` + typ + `","content":{"type":` + ctype + `,` + text + `}}}`
}

// agentPoolDelta draws an AgentPool part_delta (text, thinking or a tool
// call's arguments, as a string or an object), a null delta (dropped by
// coalescing, kept by compaction) or a progress event.
func agentPoolDelta(t *rapid.T, i int) (typ, data string) {
	switch rapid.IntRange(0, 7).Draw(t, "agentpool kind") {
	case 0:
		return coalesce.TypeToolCallProgress, `{"tool_call_id":"c","status":"running","items":[` + strconv.Itoa(i) + `]}`
	case 1:
		return coalesce.TypePartDelta, `{"delta":null}`
	case 2:
		return coalesce.TypePartDelta, `{"index":0,"delta":{"part_delta_kind":"tool_call","tool_call_id":"c` +
			strconv.Itoa(rapid.IntRange(0, 1).Draw(t, "call")) + `","args_delta":` +
			rapid.SampledFrom([]string{textLit(t, i), `{"a":1}`}).Draw(t, "args") + `}}`
	}
	kind := rapid.SampledFrom([]string{"text", "text", "thinking"}).Draw(t, "part kind")
	return coalesce.TypePartDelta, `{"index":` + strconv.Itoa(rapid.IntRange(0, 1).Draw(t, "index")) +
		`,"delta":{"part_delta_kind":"` + kind + `","content_delta":` + textLit(t, i) + `}}`
}

// TestPropertyTextFoldsReplayAsParts: a rule set folding runs as text
// (coalesce.ACP, coalesce.AgentPool: each an eventbus.TextCoalescer) replays
// exactly what the same rule set replays when every event's payload is
// kept (partsOnly): for every session and every cursor, the same frames
// — ids, types, payloads byte for byte, Count and FirstID — under random
// rings, byte bounds and payload shapes.
func TestPropertyTextFoldsReplayAsParts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set, gen := coalesce.ACP, acpDelta
		if rapid.Bool().Draw(t, "agentpool") {
			set, gen = coalesce.AgentPool, agentPoolDelta
		}
		cfg := eventbus.Options{Epoch: "e", ReplayBufferSize: rapid.IntRange(1, 5).Draw(t, "ring"),
			ReplayMaxBytes: rapid.SampledFrom([]int64{0, 0, 300, 1000}).Draw(t, "maxBytes"), ReplayCompact: set}
		text, err := eventbus.New(cfg)
		require.NoError(t, err)
		defer text.Close()
		cfg.ReplayCompact = partsOnly{set}
		parts, err := eventbus.New(cfg)
		require.NoError(t, err)
		defer parts.Close()
		sessions := []string{"a", "b"}
		ids := map[string][]uint64{}
		for i := range rapid.IntRange(0, 60).Draw(t, "events") {
			s := rapid.SampledFrom(sessions).Draw(t, "session")
			typ, data := gen(t, i)
			require.True(t, json.Valid([]byte(data)), data)
			ev, err := text.PublishJSON(s, typ, json.RawMessage(data))
			require.NoError(t, err)
			ev2, err := parts.PublishJSON(s, typ, json.RawMessage(data))
			require.NoError(t, err)
			require.Equal(t, ev.ID, ev2.ID)
			ids[s] = append(ids[s], ev.ID)
		}
		for _, s := range sessions {
			for _, c := range append([]uint64{0}, ids[s]...) {
				got, want := replayFrom(t, text, s, c), replayFrom(t, parts, s, c)
				require.Equal(t, want, got, "session %s from %d", s, c)
			}
		}
	})
}

// replayFrom returns what a subscriber resuming session s from cursor c
// receives first, one line per frame.
func replayFrom(t *rapid.T, b *eventbus.Bus, s string, c uint64) []string {
	sub, err := b.Subscribe(t.Context(), s, eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: c}})
	require.NoError(t, err)
	defer sub.Close()
	var out []string
	for _, ev := range drain(sub) {
		out = append(out, strings.Join([]string{strconv.FormatUint(ev.ID, 10), ev.Type, string(ev.Data),
			strconv.Itoa(ev.Count), strconv.FormatUint(ev.FirstID, 10)}, " "))
	}
	return out
}

// A byte payload never folds, even one whose bytes are a delta's JSON that
// a text run would take by comparing bytes: it replays as published,
// with its media type, between the records around it.
func TestTextFoldsSkipBytePayloads(t *testing.T) {
	b, err := eventbus.New(eventbus.Options{Epoch: "e", ReplayCompact: coalesce.ACP})
	require.NoError(t, err)
	defer b.Close()
	text := publishReply(t, b, "s", 0, 2)
	raw := chunk("s", tok(2))
	_, err = b.PublishBytes("s", chunkType, "application/octet-stream", raw)
	require.NoError(t, err)
	text2 := publishReply(t, b, "s", 3, 5)
	sub, err := b.Subscribe(t.Context(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	evs := drain(sub)
	require.Len(t, evs, 3, "the run, the byte payload, the next run")
	assert.Equal(t, text, chunkText(t, evs[0]))
	assert.Equal(t, 2, evs[0].Count)
	assert.Equal(t, "application/octet-stream", evs[1].ContentType())
	assert.Equal(t, []byte(raw), []byte(evs[1].Data))
	assert.Zero(t, evs[1].Count)
	assert.Equal(t, text2, chunkText(t, evs[2]))
}

// The shipped rule sets have the two methods a compacting bus stores text
// runs with (a compile-time check: the interface is unexported).
var _ eventbus.TextCoalescer = (*coalesce.Set)(nil)
