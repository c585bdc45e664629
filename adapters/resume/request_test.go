package resume_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
)

// TestParseRequestWithRules: ParseRequest with the zero QueryRules refuses
// only look-alikes of known names; Strict refuses every unknown one but
// those in Allow.
func TestParseRequestWithRules(t *testing.T) {
	t.Parallel()
	r, err := http.NewRequest(http.MethodGet, "/session/s1/events?last_event_Id=3&token=x", nil)
	require.NoError(t, err)
	_, err = resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	serr := statusOf(t, err)
	assert.Equal(t, resume.CodeUnknownParameter, serr.Code)
	assert.Contains(t, serr.Message, "last_event_id")

	r, err = http.NewRequest(http.MethodGet, "/session/s1/events?last_event_id=3&token=x", nil)
	require.NoError(t, err)
	o, err := resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	require.NoError(t, err)
	require.NotNil(t, o.Cursor)
	assert.Equal(t, uint64(3), o.Cursor.ID)
	_, err = resume.ParseRequest(r, "s1", "e", resume.QueryRules{Strict: true})
	assert.Contains(t, statusOf(t, err).Message, `"token"`)
	_, err = resume.ParseRequest(r, "s1", "e", resume.QueryRules{Strict: true, Allow: []string{"token"}})
	assert.NoError(t, err)
}

// TestParseReturnsANilError: an accepted request's error is a nil error,
// not a nil *StatusError inside a non-nil interface (the Go FAQ's trap),
// and a refusal is a *StatusError for errors.As.
func TestParseReturnsANilError(t *testing.T) {
	t.Parallel()
	r, err := http.NewRequest(http.MethodGet, "/session/s1/events?scope=descendants", nil)
	require.NoError(t, err)
	_, err = resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	assert.True(t, err == nil, "ParseRequest: %#v", err)
	_, err = resume.ParseEvents("message")
	assert.True(t, err == nil, "ParseEvents: %#v", err)
	_, err = resume.ParseEvents("nope")
	assert.Equal(t, resume.CodeInvalidEvents, statusOf(t, err).Code)
	assert.True(t, resume.StatusFor(nil, "s1") == nil, "StatusFor(nil)")
}

// statusOf is the *resume.StatusError err is, or fails the test.
func statusOf(t *testing.T, err error) *resume.StatusError {
	t.Helper()
	var se *resume.StatusError
	require.True(t, errors.As(err, &se), "want a *resume.StatusError, got %#v", err)
	return se
}
