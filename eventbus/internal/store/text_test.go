package store

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSameEnvelope: when sameEnvelope takes a payload for the envelope's
// with another string literal (what lets a compacting log skip Key), the
// payload, decoded by encoding/json, is the envelope's with another
// string at the literal's place, and the literal it found is that string.
// (The bus validates every payload as JSON; an invalid one is not asked
// about.)
func FuzzSameEnvelope(f *testing.F) {
	env := []byte(`{"sessionId":"s","update":{"content":{"text":"tok ","type":"text"},"sessionUpdate":"agent_message_chunk"}}`)
	start := bytes.Index(env, []byte(`"tok `))
	e := envelope{data: env, start: start, end: start + len(`"tok "`)}
	pre, post := string(env[:start]), string(env[e.end:])
	for _, lit := range []string{`"x"`, `""`, `"a\"b"`, `"a\\"`, `"\\\""`, `"a","text":"b"`, `"a\\","text":"b"`, `null`, `"\u00e9"`, `"é"`, `"a"`} {
		f.Add([]byte(pre + lit + post))
	}
	f.Add([]byte(pre + `"a"` + post + " "))
	f.Add(env[:len(env)-1])
	f.Fuzz(func(t *testing.T, p []byte) {
		end, ok := sameEnvelope(&e, p)
		if !ok || !json.Valid(p) {
			return
		}
		var got, want map[string]any
		require.NoError(t, json.Unmarshal(p, &got))
		require.NoError(t, json.Unmarshal(env, &want))
		var text string
		require.NoError(t, json.Unmarshal(p[start:end], &text), "the literal found: %s", p[start:end])
		want["update"].(map[string]any)["content"].(map[string]any)["text"] = text
		require.Equal(t, want, got, "%s", p)
	})
}
