package resume_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// FuzzParseCancel: any bytes give a request or a 400 naming a code and the
// problem in valid UTF-8, never a panic; an accepted request's turn is a
// turn id, and it re-encodes to something that parses to the same request.
func FuzzParseCancel(f *testing.F) {
	for _, s := range []string{``, ` `, `{}`, `{"turn":"t1"}`, `{"turn":"t1","cascade":true}`, `{"type":"cancel"}`,
		`{"turn":null}`, `{"turn":""}`, `{"turn":5}`, `{"cascade":1}`, `{"turn":"a","turn":"b"}`, `{"x":1}`, `[]`,
		`{"turn":"t"} x`, "{\"turn\":\"\xff\"}", `{"type":"stop"}`, `{"turn":"a\u0000"}`, `{`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := resume.ParseCancel(b)
		if err != nil {
			var se *resume.StatusError
			require.True(t, errors.As(err, &se), "%T", err)
			assert.Equal(t, http.StatusBadRequest, se.Status)
			assert.Contains(t, []string{resume.CodeInvalidJSON, resume.CodeInvalidTurnID}, se.Code)
			assert.True(t, utf8.ValidString(se.Message), "%q", se.Message)
			assert.NotEmpty(t, se.Message)
			return
		}
		if c.Turn != "" {
			require.NoError(t, frame.CheckName("turn id", c.Turn))
		}
		again, err := json.Marshal(c)
		require.NoError(t, err)
		c2, err := resume.ParseCancel(again)
		require.NoError(t, err, "%s", again)
		assert.Equal(t, c, c2)
	})
}

// StreamURL puts ?client= and ?presence=1 on a stream's URL, replacing
// what the URL says, and leaves the URL alone when asked for neither.
func TestStreamURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		o    resume.StreamOptions
		want string
	}{
		{"http://h/session/s/events?scope=all", resume.StreamOptions{}, "http://h/session/s/events?scope=all"},
		{"http://h/session/s/events?scope=all", resume.StreamOptions{Client: "tab 1"}, "http://h/session/s/events?client=tab+1&scope=all"},
		{"http://h/session/s/events?client=old&presence=0", resume.StreamOptions{Client: "new", Presence: true}, "http://h/session/s/events?client=new&presence=1"},
		{"ws://h/session/s/ws", resume.StreamOptions{Presence: true}, "ws://h/session/s/ws?presence=1"},
	} {
		assert.Equal(t, tc.want, resume.StreamURL(tc.in, tc.o))
	}
}

// The turn errors have one answer each, and a StatusError read back from
// one matches the bus's sentinel.
func TestStatusForTurnErrors(t *testing.T) {
	t.Parallel()
	for err, want := range map[error][2]any{
		eventbus.ErrTurnEnded:  {http.StatusConflict, resume.CodeTurnEnded},
		eventbus.ErrTurnActive: {http.StatusConflict, resume.CodeTurnActive},
	} {
		var se *resume.StatusError
		require.ErrorAs(t, resume.StatusFor(errors.Join(err, errors.New(`turn "t1"`)), "s"), &se)
		assert.Equal(t, want[0], se.Status)
		assert.Equal(t, want[1], se.Code)
		assert.Contains(t, se.Message, `turn "t1"`)
		assert.ErrorIs(t, se, err)
	}
}
