package resume_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/scope"
)

func TestConnCursorRoundTripAndAdvance(t *testing.T) {
	t.Parallel()
	c, err := resume.ParseConnCursor("ep-42;+team%3B1:descendants;-a;@team%3B1=7;@b=50")
	require.NoError(t, err)
	assert.Equal(t, uint64(42), c.Main.ID)
	assert.Equal(t, scope.Descendants, c.Added["team;1"])
	assert.True(t, c.Removed["a"])
	assert.Equal(t, map[string]uint64{"team;1": 7, "b": 50}, c.Floors)
	assert.Equal(t, "ep-42;+team%3B1:descendants;-a;@b=50;@team%3B1=7", c.String("ep"))

	c.Advance(9) // a catch-up event of team;1: its position rises, b's (ahead) stays
	assert.Equal(t, "ep-42;+team%3B1:descendants;-a;@b=50;@team%3B1=9", c.String("ep"))
	c.Advance(45) // past the main position: every position below 45 is 45
	assert.Equal(t, "ep-45;+team%3B1:descendants;-a;@b=50", c.String("ep"))
	c.Advance(50)
	assert.Equal(t, "ep-50;+team%3B1:descendants;-a", c.String("ep"))

	set := c.Set([]resume.SessionScope{{Session: "a"}, {Session: "c", Scope: scope.Subtree}})
	assert.Equal(t, []resume.SessionScope{{Session: "c", Scope: scope.Subtree}, {Session: "team;1", Scope: scope.Descendants}}, set)
}

func TestConnCursorRefusals(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"ep-1;", "ep-1;x", "ep-1;+a", "ep-1;+a:all", "ep-1;-a;-a", "ep-1;@a=x", "ep-1;@a b=1", "ep-1;+a%zz:session", "0x1;+a:session"} {
		_, err := resume.ParseConnCursor(s)
		var ce *resume.CursorError
		require.ErrorAs(t, err, &ce, s)
		assert.Equal(t, s, ce.Value)
	}
}

func TestParseSessionScope(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]resume.SessionScope{
		"a":                 {Session: "a"},
		"a:descendants":     {Session: "a", Scope: scope.Descendants},
		"a:b":               {Session: "a:b"},
		"a:subtree:session": {Session: "a:subtree"},
		"x:y:subtree":       {Session: "x:y", Scope: scope.Subtree},
	} {
		got, err := resume.ParseSessionScope(in, scope.Session)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := resume.ParseSessionScope("a:all", scope.Session)
	assert.ErrorContains(t, err, "invalid scope")
	_, err = resume.ParseSessionScope(":session", scope.Session)
	assert.ErrorContains(t, err, "empty session id")
}

// A change body encoding/json would take silently is refused naming the
// member: one given twice ({"add":[b],"add":[zz]} added zz only) or named
// in another case ({"ADD":…} was an add), at the top or in an add entry.
func TestParseManyChangeRefusesAmbiguousMembers(t *testing.T) {
	t.Parallel()
	rows := []struct{ body, says string }{
		{`{"add":[{"session":"b"}],"add":[{"session":"zz"}]}`, `member "add" given twice`},
		{`{"remove":["a"],"remove":[]}`, `member "remove" given twice`},
		{`{"ADD":[{"session":"b"}]}`, `member "ADD" (names are case-sensitive: want "add")`},
		{`{"add":[{"session":"b","session":"c"}]}`, `member "session" given twice`},
		{`{"add":[{"Session":"b"}]}`, `member "Session" (names are case-sensitive: want "session")`},
		{`{"add":[{"session":"b"},{"session":"c","from":"1","from":"2"}]}`, `member "from" given twice`},
	}
	for _, r := range rows {
		_, err := resume.ParseManyChange([]byte(r.body))
		var se *resume.StatusError
		require.ErrorAs(t, err, &se, r.body)
		assert.Equal(t, resume.CodeInvalidJSON, se.Code, r.body)
		assert.Contains(t, se.Message, r.says, r.body)
	}
	c, err := resume.ParseManyChange([]byte(`{"add":[{"session":"b","scope":"descendants"},{"session":"c"}],"remove":["a"]}`))
	require.NoError(t, err)
	assert.Len(t, c.Add, 2)
	assert.Equal(t, []string{"a"}, c.Remove)
}
