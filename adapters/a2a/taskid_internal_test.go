package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// Every (session, turn) pair the bus accepts has one task id, which
// splits back into it; the ids of turns without '@' are those written
// before ("<turn>@<session>"), so a client's stored ids keep working.
func TestTaskIDRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		session, turn, id string
	}{
		{"s", "t", "t@s"},
		{"ctx_0123", "task_abcd", "task_abcd@ctx_0123"},
		{"user@example.com", "t1", "t1@user@example.com"}, // a session with '@': as before
		{"s", "a%b", "a%b@s"},                             // '%' in a plain turn: as before
		{"s", "a@b", "@a%40b@s"},
		{"s@x", "run@1@2", "@run%401%402@s@x"},
		{"s", "@", "@%40@s"},
		{"s", "a%40@b", "@a%2540%40b@s"},
		{"s", "ü@ß", "@ü%40ß@s"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			assert.Equal(t, tc.id, TaskID(tc.session, tc.turn))
			session, turn, ok := splitTask(tc.id)
			assert.True(t, ok)
			assert.Equal(t, tc.session, session)
			assert.Equal(t, tc.turn, turn)
		})
	}
	for _, id := range []string{
		"", "t", "@s", "t@", "@", "@@", "@a%40b@", // no turn or no session
		"@ab@s",                      // the escaped form of a turn without '@': not an id TaskID writes
		"@a%41b@s",                   // an escape other than %25 and %40
		"@a%4@s", "@a%@s", "@a%2f@s", // cut or unknown escapes
	} {
		_, _, ok := splitTask(id)
		assert.False(t, ok, "%q is no task id", id)
	}
}

// The property: for any session and turn ids the bus accepts, the task id
// splits back into them; and any id that splits is the one TaskID writes
// for what it splits into (one id per task).
func TestTaskIDRoundTripProperty(t *testing.T) {
	t.Parallel()
	name := rapid.StringOfN(rapid.SampledFrom([]rune("ab@%4025ü \u00a0/")), 1, 20, -1)
	rapid.Check(t, func(rt *rapid.T) {
		session, turn := name.Draw(rt, "session"), name.Draw(rt, "turn")
		if frame.CheckName("s", session) != nil || frame.CheckName("t", turn) != nil {
			rt.Skip("not names the bus accepts")
		}
		id := TaskID(session, turn)
		s, tu, ok := splitTask(id)
		if !ok || s != session || tu != turn {
			rt.Fatalf("TaskID(%q, %q) = %q splits into %q, %q, %v", session, turn, id, s, tu, ok)
		}
	})
}

func FuzzSplitTask(f *testing.F) {
	for _, s := range []string{"t@s", "@a%40b@s", "@%40@s", "a%b@s@x", "@a%2540%40b@s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		session, turn, ok := splitTask(id)
		if !ok {
			return
		}
		if got := TaskID(session, turn); got != id {
			t.Fatalf("%q splits into %q, %q, whose task id is %q", id, session, turn, got)
		}
	})
}
