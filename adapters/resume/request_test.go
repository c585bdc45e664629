package resume_test

import (
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
	_, serr := resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	require.NotNil(t, serr)
	assert.Equal(t, resume.CodeUnknownParameter, serr.Code)
	assert.Contains(t, serr.Message, "last_event_id")

	r, err = http.NewRequest(http.MethodGet, "/session/s1/events?last_event_id=3&token=x", nil)
	require.NoError(t, err)
	o, serr := resume.ParseRequest(r, "s1", "e", resume.QueryRules{})
	require.Nil(t, serr)
	require.NotNil(t, o.Cursor)
	assert.Equal(t, uint64(3), o.Cursor.ID)
	_, serr = resume.ParseRequest(r, "s1", "e", resume.QueryRules{Strict: true})
	require.NotNil(t, serr)
	assert.Contains(t, serr.Message, `"token"`)
	_, serr = resume.ParseRequest(r, "s1", "e", resume.QueryRules{Strict: true, Allow: []string{"token"}})
	assert.Nil(t, serr)
}
