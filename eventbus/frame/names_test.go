package frame_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replaybus/replaybus/eventbus/frame"
)

// CheckName and CheckTypes give the texts the bus wraps in ErrInvalid.
func TestCheckNames(t *testing.T) {
	t.Parallel()
	assert.NoError(t, frame.CheckName("session id", "s-1 é"))
	assert.NoError(t, frame.CheckName("session id", strings.Repeat("x", frame.MaxNameLen)))
	for v, want := range map[string]string{
		"":                                      "empty session id",
		"a\nb":                                  `session id "a\nb" contains control character '\n'`,
		"\xff":                                  `session id "\xff" is not valid UTF-8`,
		strings.Repeat("x", frame.MaxNameLen+1): `session id "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"… is 257 bytes, longer than 256`,
	} {
		assert.EqualError(t, frame.CheckName("session id", v), want)
	}
	assert.NoError(t, frame.CheckTypes(nil))
	assert.NoError(t, frame.CheckTypes([]string{"a", "b"}))
	assert.EqualError(t, frame.CheckTypes([]string{"a", "a b"}), `Types: entry "a b" contains white space or a control character`)
	assert.EqualError(t, frame.CheckTypes([]string{""}), "Types: empty entry")
	assert.EqualError(t, frame.CheckTypes(make([]string, 65)), "Types: 65 entries (want at most 64)")
}
