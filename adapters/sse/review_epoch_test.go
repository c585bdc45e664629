package sse_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// Review: docs/protocol.md's parameter table and Cursor section said an
// epoch outside [A-Za-z0-9_]{1,64} is refused with 400, while the handler
// (and the Epochs section) treat any well-formed foreign epoch as an
// epoch_reset. The docs now say what the handler does; their examples are
// pinned here and in TestHandlerForeignEpochIsEpochReset.
func TestReviewProtocolDocEpochExamples(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	// The well-formed foreign examples are rows of
	// TestHandlerForeignEpochIsEpochReset. An empty epoch before the last
	// '-' is malformed, not foreign.
	w := serveDirect(t, h, "", http.Header{"Last-Event-Id": {"-2"}})
	assert.Equal(t, http.StatusBadRequest, w.Code)
	code, _ := errorBody(t, w)
	assert.Equal(t, sse.CodeInvalidLastEventID, code)
}
