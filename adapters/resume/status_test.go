package resume_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

func TestStatusErrorIs(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, &resume.StatusError{Status: 410, Code: resume.CodeSessionClosed}, eventbus.ErrSessionClosed)
	assert.ErrorIs(t, &resume.StatusError{Status: 404, Code: resume.CodeSessionNotFound}, eventbus.ErrSessionNotFound)
	assert.ErrorIs(t, &resume.StatusError{Status: 429, Code: resume.CodeSubscriberLimit}, eventbus.ErrSubscriberLimit)
	assert.NotErrorIs(t, &resume.StatusError{Status: 400, Code: resume.CodeInvalidScope}, eventbus.ErrSessionClosed)
	assert.Equal(t, "resume: 400 invalid_scope: bad", (&resume.StatusError{Status: 400, Code: resume.CodeInvalidScope, Message: "bad"}).Error())
}
