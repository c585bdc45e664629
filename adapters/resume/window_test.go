package resume_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
)

// ?types=a,b becomes SubscribeOptions.Types for both transports; a bad
// entry is a 400 invalid_types naming it.
func TestParseRequestTypes(t *testing.T) {
	t.Parallel()
	parse := func(q string) ([]string, *resume.StatusError) {
		r, err := http.NewRequest(http.MethodGet, "/session/s1/events?"+q, nil)
		require.NoError(t, err)
		o, err := resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
		if err != nil {
			return o.Types, statusOf(t, err)
		}
		return o.Types, nil
	}
	for q, want := range map[string][]string{
		"":                    nil,
		"types=":              nil,
		"types=a":             {"a"},
		"types=a,%20b%20,,c":  {"a", "b", "c"},
		"types=plan&replay=0": {"plan"},
	} {
		got, serr := parse(q)
		require.Nil(t, serr, q)
		assert.Equal(t, want, got, q)
	}
	for _, q := range []string{"types=a%20b", "types=a%0Ab", "types=a&types=b"} {
		_, serr := parse(q)
		require.NotNil(t, serr, q)
		assert.Equal(t, http.StatusBadRequest, serr.Status)
		assert.Contains(t, []string{resume.CodeInvalidTypes, resume.CodeInvalidQuery}, serr.Code, q)
	}
	_, serr := parse("types=a%20b")
	assert.Equal(t, resume.CodeInvalidTypes, serr.Code)
	assert.Contains(t, serr.Message, `"a b"`)
	_, serr = parse("type=a")
	require.NotNil(t, serr, "a look-alike of types is refused")
	assert.Equal(t, resume.CodeUnknownParameter, serr.Code)
}

// ?snapshot=1 becomes SubscribeOptions.Snapshot; anything but 0 or 1 is a
// 400 invalid_snapshot.
func TestParseRequestSnapshot(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{"": false, "snapshot=0": false, "snapshot=1": true} {
		r, err := http.NewRequest(http.MethodGet, "/session/s1/events?"+q, nil)
		require.NoError(t, err)
		o, err := resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
		require.NoError(t, err, q)
		assert.Equal(t, want, o.Snapshot, q)
	}
	r, err := http.NewRequest(http.MethodGet, "/session/s1/events?snapshot=yes", nil)
	require.NoError(t, err)
	_, err = resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	serr := statusOf(t, err)
	assert.Equal(t, resume.CodeInvalidSnapshot, serr.Code)
	assert.Contains(t, serr.Message, `"yes"`)
}
