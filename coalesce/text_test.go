package coalesce_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// at walks a decoded JSON value down path (encoding/json's view).
func at(v any, path []string) (any, bool) {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestTextSpanAgreesWithEncodingJSON: for random deltas of both rule sets
// (random text, extra fields, indentation), TextSpan finds the string
// encoding/json finds at the merge path (or says there is none); a payload
// that differs only in that string has the same key and the span of its
// own string (what a compacting bus relies on to skip Key); and JoinText
// of the payloads' strings is Merge's payload, byte for byte.
func TestTextSpanAgreesWithEncodingJSON(t *testing.T) {
	str := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"", "\"", "\\", "\xff", "é", "}", "a\u2028b", "\x00"}))
	rapid.Check(t, func(rt *rapid.T) {
		text := rapid.OneOf(rapid.Map(str, func(s string) any { return s }), rapid.Just[any](nil), rapid.Just[any](1)).Draw(rt, "text")
		extra := rapid.MapOfN(rapid.SampledFrom([]string{"x", "text", "type", "content", "tool_call_id"}), rapid.Map(str, func(s string) any { return s }), 0, 2)
		inner := extra.Draw(rt, "inner")
		var set *coalesce.Set
		var typ string
		var path []string
		var ev map[string]any
		switch rapid.IntRange(0, 2).Draw(rt, "shape") {
		case 0:
			set, typ, path = coalesce.ACP, rapid.SampledFrom([]string{"agent_message_chunk", "agent_thought_chunk"}).Draw(rt, "type"), []string{"update", "content", "text"}
			inner["type"], inner["text"] = rapid.SampledFrom([]string{"text", "text", "image"}).Draw(rt, "content type"), text
			ev = map[string]any{"sessionId": "s", "update": map[string]any{"sessionUpdate": typ, "content": inner}}
		case 1:
			set, typ, path = coalesce.AgentPool, coalesce.TypePartDelta, []string{"delta", "content_delta"}
			inner["part_delta_kind"], inner["content_delta"] = rapid.SampledFrom([]string{"text", "thinking", "other"}).Draw(rt, "kind"), text
			ev = map[string]any{"index": 0, "delta": inner}
		default:
			set, typ, path = coalesce.AgentPool, coalesce.TypePartDelta, []string{"delta", "args_delta"}
			inner["part_delta_kind"], inner["args_delta"] = "tool_call", text
			ev = map[string]any{"delta": inner}
		}
		if rapid.Bool().Draw(rt, "absent") {
			delete(inner, path[len(path)-1])
		}
		data, err := json.Marshal(ev)
		require.NoError(rt, err)
		if rapid.Bool().Draw(rt, "indent") {
			var buf bytes.Buffer
			require.NoError(rt, json.Indent(&buf, data, " ", "\t"))
			data = buf.Bytes()
		}
		key, _ := set.Key(eventbus.Event{Type: typ, Data: data})
		if key == "" {
			return
		}
		start, end, ok := set.TextSpan(key, typ, data)
		require.True(rt, ok, "a Concat key of the built-in sets folds as text")
		var decoded any
		require.NoError(rt, json.Unmarshal(data, &decoded))
		want, has := at(decoded, path)
		if start < 0 {
			require.True(rt, !has || want == nil, "no string at the path in %s", data)
			return
		}
		var got string
		require.NoError(rt, json.Unmarshal(data[start:end], &got))
		require.Equal(rt, want, got, "the string encoding/json finds in %s", data)

		// The same payload with another string there.
		other, err := json.Marshal(str.Draw(rt, "other"))
		require.NoError(rt, err)
		p := slices.Concat(data[:start], other, data[end:])
		key2, _ := set.Key(eventbus.Event{Type: typ, Data: p})
		require.Equal(rt, key, key2, "the key does not depend on the text: %s", p)
		s2, e2, ok := set.TextSpan(key, typ, p)
		require.True(rt, ok)
		require.Equal(rt, []int{start, start + len(other)}, []int{s2, e2})

		merged, err := set.Merge(key, []eventbus.Event{{Type: typ, Data: data}, {Type: typ, Data: p}})
		require.NoError(rt, err)
		joined, err := set.JoinText(key, p, slices.Values([][]byte{data[start+1 : end-1], other[1 : len(other)-1]}))
		require.NoError(rt, err)
		require.Equal(rt, string(merged), string(joined), "JoinText is Merge (from an envelope of the run)")
	})
}

// TextSpan refuses every key whose merge is not a text concatenation or
// whose key could depend on the text: a compacting bus then keeps every
// payload and asks Key for every event.
func TestTextSpanOnlyWhereTheKeyIgnoresTheText(t *testing.T) {
	concat := coalesce.Merge{Op: coalesce.Concat, Path: "a.t"}
	data := []byte(`{"a":{"t":"x","k":"1","l":[1]}}`)
	for _, c := range []struct {
		name string
		rule coalesce.Rule
		text bool
	}{
		{"concat", coalesce.Rule{Types: []string{"d"}, Merge: concat}, true},
		{"a key path beside the text", coalesce.Rule{Types: []string{"d"}, KeyPaths: []string{"a.k"}, Merge: concat}, true},
		{"a condition on the text", coalesce.Rule{Types: []string{"d"}, When: map[string]string{"a.t": "x"}, Merge: concat}, false},
		{"a key path holding the text", coalesce.Rule{Types: []string{"d"}, KeyPaths: []string{"a"}, Merge: concat}, false},
		{"a key function", coalesce.Rule{Types: []string{"d"}, Key: func(json.RawMessage) (string, bool) { return "k", true }, Merge: concat}, false},
		{"append", coalesce.Rule{Types: []string{"d"}, Merge: coalesce.Merge{Op: coalesce.Append, Path: "a.l"}}, false},
		{"last", coalesce.Rule{Types: []string{"d"}, Merge: coalesce.Merge{Op: coalesce.Last}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := coalesce.MustCompile(coalesce.RuleSet{Name: "t", Rules: []coalesce.Rule{c.rule}})
			key, _ := set.Key(eventbus.Event{Type: "d", Data: data})
			require.NotEmpty(t, key)
			_, _, ok := set.TextSpan(key, "d", data)
			assert.Equal(t, c.text, ok)
		})
	}
	// A rule tried before it for the same type reads the text.
	set := coalesce.MustCompile(coalesce.RuleSet{Name: "t", Rules: []coalesce.Rule{
		{Types: []string{"d"}, When: map[string]string{"a.t": "stop"}, Merge: coalesce.Merge{Op: coalesce.Last}},
		{Types: []string{"d"}, Merge: concat},
	}})
	key, _ := set.Key(eventbus.Event{Type: "d", Data: data})
	require.True(t, strings.HasPrefix(key, "1\x1f"), "the second rule: %q", key)
	_, _, ok := set.TextSpan(key, "d", data)
	assert.False(t, ok, "an earlier rule's condition reads the text")
	_, err := set.JoinText("0\x1frule0\x1fd", data, slices.Values([][]byte{[]byte("x")}))
	assert.Error(t, err, "a key whose merge is not Concat")
}

// A UTF-16 surrogate pair a producer's JSON escapes split across two text
// chunks ("\ud83d", then "\ude00": 😀) is one rune once merged, by the
// subscriber-side Merge and by a compacting bus's JoinText alike; each
// chunk's text unescaped on its own (encoding/json) was U+FFFD, and the
// merge held two U+FFFD. A half with no partner stays U+FFFD.
func TestMergeJoinsASurrogatePairSplitAcrossChunks(t *testing.T) {
	chunk := func(id uint64, lit string) eventbus.Event {
		return eventbus.Event{ID: id, Type: "agent_message_chunk", Data: json.RawMessage(
			`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + lit + `}}}`)}
	}
	text := func(t *testing.T, data json.RawMessage) string {
		var v struct {
			Update struct{ Content struct{ Text string } }
		}
		require.NoError(t, json.Unmarshal(data, &v), "%s", data)
		return v.Update.Content.Text
	}
	for _, tc := range []struct {
		name string
		lits []string
		want string
	}{
		{"a pair in two", []string{`"a \ud83d"`, `"\ude00 b"`}, "a 😀 b"},
		{"upper case hex", []string{`"\uD83D"`, `"\uDE00"`}, "😀"},
		{"with a chunk between of no text", []string{`"\ud83d"`, `null`, `"\ude00"`}, "😀"},
		{"a lone high half", []string{`"x\ud83d"`, `"y"`}, "x\uFFFDy"},
		{"a lone low half", []string{`"x"`, `"\ude00y"`}, "x\uFFFDy"},
		{"an escaped backslash before u", []string{`"\\ud83d"`, `"\ude00"`}, `\ud83d` + "\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := make([]eventbus.Event, len(tc.lits))
			for i, l := range tc.lits {
				evs[i] = chunk(uint64(i+1), l)
			}
			key, drop := coalesce.ACP.Key(evs[0])
			require.False(t, drop)
			require.NotEmpty(t, key)
			merged, err := coalesce.ACP.Merge(key, evs)
			require.NoError(t, err)
			assert.Equal(t, tc.want, text(t, merged), "Merge")

			texts := func(yield func([]byte) bool) {
				for _, l := range tc.lits {
					if l == "null" {
						continue
					}
					if !yield([]byte(l[1 : len(l)-1])) {
						return
					}
				}
			}
			joined, err := coalesce.ACP.JoinText(key, evs[0].Data, texts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, text(t, joined), "JoinText")
		})
	}
}
