package textutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"abc"`, Quote("abc", 64))
	assert.Equal(t, `"\xd9"`, Quote("\xd9", 64))
	assert.Equal(t, `"٣"`, Quote("٣", 64))
	long := strings.Repeat("é", 40) // 80 bytes: cut at 64, a rune boundary
	assert.Equal(t, `"`+strings.Repeat("é", 32)+`"…(80 bytes)`, Quote(long, 64))
	assert.Equal(t, `"`+strings.Repeat("é", 31)+`"…(80 bytes)`, Quote(long, 63), "never half a rune")
}

func TestPublicMessage(t *testing.T) {
	assert.Equal(t, `session "x" not found`, PublicMessage(errors.New(`eventbus: session "x" not found`)))
	assert.Equal(t, "a: b", PublicMessage(errors.New("sse: json: a: b")))
	assert.Equal(t, "plain", PublicMessage(errors.New("plain")))
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b      string
		transpose bool
		want      int
	}{
		{"", "", false, 0},
		{"scope", "scopes", false, 1},
		{"lasteventid", "lastevntid", true, 1},
		{"ab", "ba", false, 2},
		{"ab", "ba", true, 1},
		{"maxqueue", "maxqueued", true, 1},
		{strings.Repeat("a", 70), strings.Repeat("a", 69) + "b", false, 1},
	} {
		assert.Equal(t, tc.want, Distance(tc.a, tc.b, tc.transpose), "%q %q", tc.a, tc.b)
	}
}

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	assert.NoError(t, CheckHeader(nil))
	assert.NoError(t, CheckHeader(map[string][]string{"Authorization": {"Bearer a\tb"}, "X-A_b.c~": {""}}))
	for h, want := range map[string]map[string][]string{
		`header Authorization: value "Bearer x\n" contains control character '\n'`: {"Authorization": {"ok", "Bearer x\n"}},
		`header X: value "a\x00" contains control character '\x00'`:                {"X": {"a\x00"}},
		`header X: value "\x7f" contains control character '\x7f'`:                 {"X": {"\x7f"}},
		`header name "Bad Name": character ' ' is not allowed in a name`:           {"Bad Name": {"v"}},
		`empty header name`: {"": {"v"}},
	} {
		err := CheckHeader(want)
		if assert.Error(t, err, h) {
			assert.Equal(t, h, err.Error())
		}
	}
}

func TestInvalidUTF8At(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"": 0, "abc": 3, "é€😀": 9, "\xff": 0, "ab\xc3\x28": 2, "a\xed\xa0\x80": 1, "ok\xe2\x82": 2,
	} {
		assert.Equal(t, want, InvalidUTF8At([]byte(in)), "%q", in)
	}
}

// AppendJSONString writes what encoding/json writes with SetEscapeHTML(false),
// and its result is valid UTF-8 whatever s holds.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\x00\x01\x1f\x7f", "é€😀", "\xff\xfe", "a\xc3", "a\u2028b\u2029c", `"\/`, "\b\f\n\r\t", "<>&"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		got := AppendJSONString([]byte("x"), s)
		assert.Equal(t, "x"+strings.TrimSuffix(buf.String(), "\n"), string(got), "string %q", s)
		assert.True(t, utf8.Valid(got), "string %q", s)
	}
}

func TestMarshalJSONDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"ampersand", map[string]string{"message": "a & b"}, `{"message":"a & b"}`},
		{"angles", []string{"<b>", "x>y"}, `["<b>","x>y"]`},
		{"controls still escaped", "a\nb\u2028\x00", `"a\nb\u2028\u0000"`},
		{"invalid UTF-8 as an escaped U+FFFD", "a\xffb", `"a\ufffdb"`},
		{"no trailing newline", 1, `1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := MarshalJSON(tc.v)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b))
		})
	}
	_, err := MarshalJSON(make(chan int))
	var ute *json.UnsupportedTypeError
	assert.ErrorAs(t, err, &ute)
}
