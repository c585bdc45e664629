package coalesce

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// lookup scans JSON in place; it must agree with encoding/json on every
// key of random nested objects, including keys and strings with escapes,
// braces and quotes inside strings, and repeated keys.
func TestLookupAgreesWithEncodingJSON(t *testing.T) {
	key := rapid.SampledFrom([]string{"a", "b", "text", "t\"q", "x\\y", "{", "é", "a b", "\u2028"})
	var value *rapid.Generator[any]
	value = rapid.Deferred(func() *rapid.Generator[any] {
		return rapid.OneOf(
			rapid.Map(rapid.String(), func(s string) any { return s }),
			rapid.Map(rapid.Float64(), func(f float64) any { return f }),
			rapid.Just[any](nil), rapid.Just[any](true),
			rapid.Map(rapid.SliceOfN(value, 0, 3), func(v []any) any { return v }),
			rapid.Map(rapid.MapOfN(key, value, 0, 3), func(m map[string]any) any { return m }),
		)
	})
	rapid.Check(t, func(rt *rapid.T) {
		m := rapid.MapOfN(key, value, 0, 5).Draw(rt, "object")
		data, err := json.Marshal(m)
		require.NoError(rt, err)
		if rapid.Bool().Draw(rt, "indent") {
			var buf bytes.Buffer
			require.NoError(rt, json.Indent(&buf, data, "", "  "))
			data = buf.Bytes()
		}
		for _, k := range []string{"a", "b", "text", "t\"q", "x\\y", "{", "é", "a b", "\u2028", "missing"} {
			got, ok := lookup(data, []string{k})
			want, has := m[k]
			require.Equal(rt, has, ok, "key %q in %s", k, data)
			if has {
				var g any
				require.NoError(rt, json.Unmarshal(got, &g), "value %q", got)
				require.Equal(rt, want, g)
			}
		}
	})
	v, ok := lookup([]byte(`{"a":1,"a":{"b":"x"}}`), []string{"a", "b"})
	assert.True(t, ok, "the last of repeated keys wins, as in encoding/json")
	assert.Equal(t, `"x"`, string(v))
	_, ok = lookup([]byte(`["a"]`), []string{"a"})
	assert.False(t, ok)
	_, ok = lookup([]byte(`{"a":"x"}`), []string{"a", "b"})
	assert.False(t, ok, "a string on the way is not an object")
}
