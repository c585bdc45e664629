package sse

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replaybus/replaybus/adapters/resume"
)

func TestCommentAndRetry(t *testing.T) {
	t.Parallel()
	assert.Equal(t, ": heartbeat\n\n", string(appendComment(nil, "heartbeat")))
	assert.Equal(t, ": a_b_c\n\n", string(appendComment(nil, "a\rb\nc")))
	assert.Equal(t, "retry: 3000\n\n", string(appendRetry(nil, DefaultRetry)))
	assert.Equal(t, "retry: 0\n\n", string(appendRetry(nil, -1)))
	assert.Equal(t, "7", resume.FormatID(7, ""))
	assert.Equal(t, "e-7", resume.FormatID(7, "e"))
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestEncoderCommentReturnsWriteError(t *testing.T) {
	t.Parallel()
	enc := NewEncoder(failingWriter{}, EncodeOptions{})
	assert.EqualError(t, enc.comment("x"), "boom")
	assert.EqualError(t, enc.retry(1), "boom")
}
