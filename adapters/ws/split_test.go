package ws_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
)

// TestSplitBatch is the splitter's spec: the elements of a well-formed
// array, as sub-slices, in order (strings with brackets, commas, escaped
// quotes and raw newlines inside are one element); every malformed batch a
// clear error naming where.
func TestSplitBatch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string // a substring of the error; "" for none
	}{
		{in: `[{"v":1}]`, want: []string{`{"v":1}`}},
		{in: " [ {\"a\":1} ,\n{\"b\":[1,{\"c\":2}]} ] \r\n", want: []string{`{"a":1}`, `{"b":[1,{"c":2}]}`}},
		{in: `[{"s":"],[{}\"\\"},{"t":"a\nb"}]`, want: []string{`{"s":"],[{}\"\\"}`, `{"t":"a\nb"}`}},
		{in: "[{\"t\":\"raw\nnewline\"}]", want: []string{"{\"t\":\"raw\nnewline\"}"}},
		{in: `[{"s":"\\\\"},{}]`, want: []string{`{"s":"\\\\"}`, `{}`}},
		{in: ``, err: `at byte 0 (""): want a JSON array of envelopes`},
		{in: `{"v":1}`, err: `at byte 0 ("{\"v\":1}"): want a JSON array of envelopes`},
		{in: `[]`, err: `at byte 1 ("]"): an empty batch`},
		{in: `[1]`, err: `at byte 1 ("1]"): want an envelope (a JSON object)`},
		{in: `[{"a":1},]`, err: `at byte 9 ("]"): want an envelope`},
		{in: `[{"a":1}{"b":2}]`, err: `at byte 8 ("{\"b\":2}]"): want ',' or ']' after an envelope`},
		{in: `[{"a":1}`, err: `at byte 8 (""): the array is not closed`},
		{in: `[{"a":1}] x`, err: `at byte 10 ("x"): trailing data after the array`},
		{in: `[{"a":"1}]`, err: `at byte 6 ("\"1}]"): unterminated string`},
		{in: `[{"a":"\"}]`, err: `unterminated string`},
		{in: `[{"a":{"b":1}]`, err: `at byte 14 (""): the array is not closed`},
		{in: `[{"a":{"b":1}`, err: `at byte 13 (""): unterminated envelope`},
	} {
		got, err := ws.SplitBatch([]byte(tc.in), nil)
		if tc.err != "" {
			require.Error(t, err, "%q", tc.in)
			assert.Contains(t, err.Error(), "ws: malformed batch ", "%q", tc.in)
			assert.Contains(t, err.Error(), tc.err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		assert.Equal(t, tc.want, gs, "%q", tc.in)
	}
}

// FuzzSplitBatch: any bytes give elements or an error, never a panic;
// whatever encoding/json reads as an array of objects splits into the same
// elements, and what SplitBatch accepts joins back to the input's array.
func FuzzSplitBatch(f *testing.F) {
	for _, s := range []string{`[{"v":1,"type":"a","data":"x\ny"}]`, `[{},{"a":[1,"]"]}]`, `[`, `[{"a":"\\"}]`, `[{]`, `[{"a":1}] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ws.SplitBatch(b, nil)
		var raw []json.RawMessage
		if json.Unmarshal(b, &raw) == nil && len(raw) > 0 && allObjects(raw) {
			require.NoError(t, err, "%q is an array of objects", b)
			require.Len(t, got, len(raw))
			for i := range raw {
				assert.Equal(t, string(raw[i]), string(got[i]))
			}
		}
		if err != nil {
			assert.Contains(t, err.Error(), "ws: malformed batch at byte ")
			return
		}
		parts := make([]string, len(got))
		for i, g := range got {
			parts[i] = string(g)
			require.True(t, strings.HasPrefix(parts[i], "{") && strings.HasSuffix(parts[i], "}"), "element %q", g)
		}
		assert.Equal(t, compactSpace(string(b)), compactSpace("["+strings.Join(parts, ",")+"]"))
	})
}

func allObjects(raw []json.RawMessage) bool {
	for _, r := range raw {
		if len(r) == 0 || r[0] != '{' {
			return false
		}
	}
	return true
}

// compactSpace drops every JSON whitespace byte (inside strings too: it
// is applied to both sides of a comparison alike).
func compactSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}
