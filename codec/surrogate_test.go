package codec_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
)

// chunkOf is an ACP agent_message_chunk event whose text is the JSON
// string literal lit.
func chunkOf(id uint64, lit string) eventbus.Event {
	return eventbus.Event{ID: id, Session: "s1", Type: "agent_message_chunk", Data: []byte(
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + lit + `}}}`)}
}

// escapeUTF16 writes units as the contents of a JSON string literal, each
// unit a \u escape (as a UTF-16 producer may).
func escapeUTF16(units []uint16) string {
	var b strings.Builder
	for _, u := range units {
		fmt.Fprintf(&b, `\u%04x`, u)
	}
	return b.String()
}

// A UTF-16 surrogate pair a producer split across two ACP text chunks
// ("\ud83d" then "\ude00") decodes and joins (TextJoin, as the encoders
// write text) into one 😀, not two U+FFFD; a half without its partner is
// U+FFFD. Property: any text, written as UTF-16 escapes and cut into
// chunks at any code unit, decodes and joins back to itself, and every
// joined piece is valid UTF-8.
func TestTextJoinPairsASurrogateSplitAcrossChunks(t *testing.T) {
	join := func(evs ...eventbus.Event) (string, []string) {
		var j codec.TextJoin
		var out strings.Builder
		var pieces []string
		for _, ev := range evs {
			parts := codec.Default.Decode(nil, ev)
			require.Len(t, parts, 1)
			require.Equal(t, codec.Text, parts[0].Kind, "%s", ev.Data)
			p := j.Next(parts[0].Text)
			pieces = append(pieces, p)
			out.WriteString(p)
		}
		f := j.Flush()
		pieces = append(pieces, f)
		out.WriteString(f)
		return out.String(), pieces
	}
	got, pieces := join(chunkOf(1, `"a \ud83d"`), chunkOf(2, `"\ude00 b"`))
	assert.Equal(t, "a 😀 b", got)
	assert.Equal(t, []string{"a ", "😀 b", ""}, pieces, "the half is held until its partner comes")
	got, _ = join(chunkOf(1, `"\uD83D"`), chunkOf(2, `"\uDE00"`))
	assert.Equal(t, "😀", got)
	got, _ = join(chunkOf(1, `"x\ud83d"`), chunkOf(2, `"y"`))
	assert.Equal(t, "x\uFFFDy", got, "a lone high half")
	got, _ = join(chunkOf(1, `"x"`), chunkOf(2, `"\ude00y"`))
	assert.Equal(t, "x\uFFFDy", got, "a lone low half")
	got, _ = join(chunkOf(1, `"end \ud83d"`))
	assert.Equal(t, "end \uFFFD", got, "a half at the end: Flush")
	got, _ = join(chunkOf(1, `"\\ud83d"`), chunkOf(2, `"ok \"q\" \u00e9"`))
	assert.Equal(t, `\ud83d`+`ok "q" é`, got, "an escaped backslash, other escapes")

	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.StringOf(rapid.SampledFrom([]rune{'a', 'é', '中', '😀', '𝄞', '"', '\\', '\n'})).Draw(rt, "text")
		units := utf16.Encode([]rune(s))
		var evs []eventbus.Event
		for i := 0; i < len(units); {
			n := rapid.IntRange(1, 3).Draw(rt, "units")
			n = min(n, len(units)-i)
			evs = append(evs, chunkOf(uint64(len(evs)+1), `"`+escapeUTF16(units[i:i+n])+`"`))
			i += n
		}
		var j codec.TextJoin
		var out strings.Builder
		for _, ev := range evs {
			parts := codec.Default.Decode(nil, ev)
			if len(parts) != 1 {
				rt.Fatalf("%s: %d parts", ev.Data, len(parts))
			}
			p := j.Next(parts[0].Text)
			if !utf8.ValidString(p) {
				rt.Fatalf("a piece that is not UTF-8: %q", p)
			}
			out.WriteString(p)
		}
		out.WriteString(j.Flush())
		if out.String() != s {
			rt.Fatalf("joined %q, want %q", out.String(), s)
		}
	})
}
