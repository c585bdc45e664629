package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An attacker's body: encoding/json matches member names case-insensitively
// and lets the last of a repeated member win, so
// POST {"type":"x","TYPE":"y"} published an event of type "y" while a proxy
// or gateway rule reading the body saw type "x"; {"id":"a","id":"b"} created
// session "b". Both are now 400 invalid_json naming the member, consume no
// id and create nothing; the exact names still work.
func TestBodyMembersAreExactAndUnique(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	before := s.Bus().LastEventID()
	for _, tc := range []struct{ name, target, body, want string }{
		{"case-folded type", "/session/s1/events", `{"type":"x","TYPE":"y"}`, `unknown field "TYPE"`},
		{"case-folded only", "/session/s1/events", `{"Type":"y"}`, `unknown field "Type"`},
		{"repeated type", "/session/s1/events", `{"type":"x","type":"y"}`, `member "type" given twice`},
		{"repeated data", "/session/s1/events", `{"type":"x","data":1,"data":2}`, `member "data" given twice`},
		{"repeated id", "/sessions", `{"id":"a","id":"b"}`, `member "id" given twice`},
		{"case-folded parent", "/sessions", `{"id":"c","Parent":"s1"}`, `unknown field "Parent"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, out := do(t, s, http.MethodPost, tc.target, tc.body)
			assert.Equal(t, http.StatusBadRequest, status, "%v", out)
			assert.Equal(t, "invalid_json", out["code"])
			assert.Contains(t, out["message"], tc.want)
		})
	}
	assert.Equal(t, before, s.Bus().LastEventID(), "refused bodies consume no id")
	sessions := map[string]bool{}
	for _, si := range s.Bus().Sessions() {
		sessions[si.ID] = true
	}
	require.True(t, sessions["s1"], "Sessions lists sessions without subscribers")
	for _, id := range []string{"a", "b", "c"} {
		ok := sessions[id]
		assert.False(t, ok, "session %q was not created", id)
	}
	// Nested members inside data are the publisher's business: not checked.
	status, _, out := do(t, s, http.MethodPost, "/session/s1/events", `{"type":"x","data":{"k":1,"K":2,"k":3}}`)
	assert.Equal(t, http.StatusAccepted, status, "%v", out)
	status, _, out = do(t, s, http.MethodPost, "/sessions", `{"id":"d","parent":"s1"}`)
	assert.Equal(t, http.StatusCreated, status, "%v", out)
}

// encoding/json reads a lone UTF-16 surrogate escape as U+FFFD, so
// POST /sessions {"id":"\ud800"} created session "\uFFFD" — not the id in the
// body — and a type or parent went the same way. A lone escape in a member
// is now 400 naming it; pairs (an emoji) and escapes inside data pass.
func TestBodyLoneSurrogateRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	for _, tc := range []struct{ target, body, want string }{
		{"/sessions", `{"id":"\ud800"}`, `member "id" has a lone UTF-16 surrogate escape \ud800`},
		{"/sessions", `{"id":"a\uDC00b"}`, `\uDC00`},
		{"/sessions", `{"id":"x\ud83d\u0041"}`, `\ud83d`},
		{"/session/s1/events", `{"type":"t\\\ud800"}`, `member "type"`},
		{"/session/s1/events", `{"type":"t","origin":"\udfff"}`, `member "origin"`},
	} {
		status, _, out := do(t, s, http.MethodPost, tc.target, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s %v", tc.body, out)
		assert.Contains(t, out["message"], tc.want, tc.body)
	}
	status, _, out := do(t, s, http.MethodPost, "/sessions", `{"id":"run-\ud83d\ude00"}`)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	assert.Equal(t, "run-\U0001F600", out["id"], "a pair is one character")
	status, _, out = do(t, s, http.MethodPost, "/session/s1/events", `{"type":"t","data":{"s":"\ud800"}}`)
	assert.Equal(t, http.StatusAccepted, status, "data is the publisher's: %v", out)
	status, _, out = do(t, s, http.MethodPost, "/session/s1/events", `{"type":"a\\ud800"}`)
	assert.Equal(t, http.StatusAccepted, status, "an escaped backslash, then text: %v", out)
}
