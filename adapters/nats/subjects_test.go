package nats

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEscapeToken(t *testing.T) {
	for _, c := range []struct{ id, tok string }{
		{"plain-ID_09", "plain-ID_09"},
		{"a.b", "a%2Eb"},
		{"*", "%2A"},
		{">", "%3E"},
		{"two words", "two%20words"},
		{"100%", "100%25"},
		{"ünï", "%C3%BCn%C3%AF"},
		{"日本", "%E6%97%A5%E6%9C%AC"},
		{"a/b\\c", "a%2Fb%5Cc"},
		{"$SYS", "%24SYS"},
	} {
		tok := escapeToken(c.id)
		assert.Equal(t, c.tok, tok, "escape %q", c.id)
		back, err := unescapeToken(tok)
		require.NoError(t, err)
		assert.Equal(t, c.id, back)
		assert.False(t, strings.ContainsAny(tok, ".*> \t"), "token %q", tok)
	}
}

func TestUnescapeRefuses(t *testing.T) {
	for _, tok := range []string{"", "a.b", "%2", "%", "%2e", "%41", "a b", "%G0", "*"} {
		_, err := unescapeToken(tok)
		assert.ErrorIs(t, err, errBadToken, "token %q", tok)
	}
}

func TestSubjectPath(t *testing.T) {
	path := []string{"root", "child.1", "*", "x > y", "ü"}
	subj := subjectFor("rb.ev", path)
	assert.Equal(t, "rb.ev.root.child%2E1.%2A.x%20%3E%20y.%C3%BC", subj)
	back, err := pathOf("rb.ev", subj)
	require.NoError(t, err)
	assert.Equal(t, path, back)
	_, err = pathOf("rb.ev", "other.root")
	assert.Error(t, err)
	_, err = pathOf("rb.ev", "rb.ev")
	assert.Error(t, err)
	_, err = pathOf("rb", "rb.ev.x")
	assert.NoError(t, err)
}

func TestCheckNames(t *testing.T) {
	assert.NoError(t, checkPrefix("replaybus"))
	assert.NoError(t, checkPrefix("a.b-c"))
	for _, p := range []string{"", "a..b", "a.*", ">", "a b", ".a"} {
		assert.Error(t, checkPrefix(p), "%q", p)
	}
	assert.NoError(t, checkStreamName("REPLAYBUS_1"))
	for _, n := range []string{"", "a.b", "a b", strings.Repeat("x", 65), "a*"} {
		assert.Error(t, checkStreamName(n), "%q", n)
	}
}

// FuzzToken: escape then unescape is the identity, and tokens are valid.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"a", "a.b", "*", ">", " ", "ü", "%", "%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" {
			return
		}
		tok := escapeToken(id)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("bad token %q for %q", tok, id)
		}
		back, err := unescapeToken(tok)
		if err != nil || back != id {
			t.Fatalf("round trip %q → %q → %q, %v", id, tok, back, err)
		}
		// Any token that unescapes must be the escape of what it gives.
		if id2, err := unescapeToken(id); err == nil && escapeToken(id2) != id {
			t.Fatalf("token %q unescapes to %q which escapes to %q", id, id2, escapeToken(id2))
		}
	})
}
