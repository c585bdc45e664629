package scope_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/scope"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    scope.Kind
		wantErr bool
	}{
		{in: "session", want: scope.Session},
		{in: "descendants", want: scope.Descendants},
		{in: "subtree", want: scope.Subtree},
		{in: "all", want: scope.All},
		{in: "Session", wantErr: true},
		{in: "SESSION", wantErr: true},
		{in: " session", wantErr: true},
		{in: "session ", wantErr: true},
		{in: "session\n", wantErr: true},
		{in: "", wantErr: true},
		{in: "descendant", wantErr: true},
		{in: "children", wantErr: true},
		{in: "sub tree", wantErr: true},
		{in: "All", wantErr: true},
		{in: "*", wantErr: true},
		{in: "0", wantErr: true},
		{in: "scope(4)", wantErr: true},
		{in: "session\x00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			t.Parallel()
			got, err := scope.Parse(tt.in)
			if tt.wantErr {
				assert.EqualError(t, err, "scope: unknown scope "+strconv.Quote(tt.in)+" (want session, descendants, subtree or all)")
				assert.Equal(t, scope.Session, got, "zero Kind on error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
		})
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k     scope.Kind
		want  string
		valid bool
	}{
		{scope.Session, "session", true},
		{scope.Descendants, "descendants", true},
		{scope.Subtree, "subtree", true},
		{scope.All, "all", true},
		{scope.Kind(4), "scope(4)", false},
		{scope.Kind(255), "scope(255)", false},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.k.String())
			assert.Equal(t, tt.valid, tt.k.Valid())
		})
	}
	var zero scope.Kind
	assert.Equal(t, scope.Session, zero, "the zero Kind is Session")
}

func TestMarshalText(t *testing.T) {
	t.Parallel()
	for _, k := range []scope.Kind{scope.Session, scope.Descendants, scope.Subtree, scope.All} {
		b, err := k.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, k.String(), string(b))

		var back scope.Kind = 99
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, k, back)
	}

	_, err := scope.Kind(4).MarshalText()
	assert.EqualError(t, err, "scope: invalid scope 4")

	k := scope.All
	err = k.UnmarshalText([]byte("Session"))
	assert.EqualError(t, err, `scope: unknown scope "Session" (want session, descendants, subtree or all)`)
	assert.Equal(t, scope.All, k, "a failed UnmarshalText leaves the value alone")
}

func TestKindJSON(t *testing.T) {
	t.Parallel()
	type req struct {
		Scope scope.Kind `json:"scope"`
	}
	b, err := json.Marshal(req{Scope: scope.Descendants})
	require.NoError(t, err)
	assert.JSONEq(t, `{"scope":"descendants"}`, string(b))

	var r req
	require.NoError(t, json.Unmarshal([]byte(`{"scope":"subtree"}`), &r))
	assert.Equal(t, scope.Subtree, r.Scope)

	err = json.Unmarshal([]byte(`{"scope":"tree"}`), &r)
	assert.ErrorContains(t, err, `scope: unknown scope "tree"`)
	_, err = json.Marshal(req{Scope: 7})
	assert.ErrorContains(t, err, "scope: invalid scope 7")

	m, err := json.Marshal(map[scope.Kind]int{scope.All: 1})
	require.NoError(t, err)
	assert.JSONEq(t, `{"all":1}`, string(m), "Kind works as a map key too")
}

// FuzzParse checks that Parse accepts exactly the four names, round-trips
// them, and quotes anything else in its error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"session", "descendants", "subtree", "all", "", "Session", " all", "descendant", "\xff", "all\x00"} {
		f.Add(s)
	}
	valid := map[string]bool{"session": true, "descendants": true, "subtree": true, "all": true}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := scope.Parse(s)
		if !valid[s] {
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", s, k)
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not quote %q", err, s)
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if !k.Valid() || k.String() != s {
			t.Fatalf("Parse(%q) = %v", s, k)
		}
		b, err := k.MarshalText()
		if err != nil || string(b) != s {
			t.Fatalf("MarshalText(%v) = %q, %v", k, b, err)
		}
	})
}
