package sse_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// Review: docs/protocol.md's parameter table and Cursor section said an
// epoch outside [A-Za-z0-9_]{1,64} is refused with 400, while the handler
// (and the Epochs section) treat any well-formed foreign epoch as an
// epoch_reset. The docs now say what the handler does; this test pins the
// examples they give.
func TestReviewProtocolDocEpochExamples(t *testing.T) {
	t.Parallel()
	b := newBus(t, config.Config{})
	for i := range 3 {
		publish(t, b, "s1", "t", i)
	}
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	for name, hdr := range map[string]http.Header{
		"punctuation in a qualified id": {"Last-Event-Id": {"foo!-2"}},
		"space in a qualified id":       {"Last-Event-Id": {"a b-2"}},
		"punctuation in the header":     {"X-Event-Epoch": {"garbage!!"}, "Last-Event-Id": {"2"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
			r.SetPathValue("id", "s1")
			for k, v := range hdr {
				r.Header[k] = v
			}
			w := serveUntilID(t, h, r, 3)
			require.Equal(t, http.StatusOK, w.code(), w.body())
			evs := frames(t, w.body())
			require.NotEmpty(t, evs)
			require.Equal(t, eventbus.TypeStateResyncRequired, evs[0].Type)
			var rd eventbus.ResyncData
			require.NoError(t, json.Unmarshal(evs[0].Data, &rd))
			assert.Equal(t, eventbus.ReasonEpochReset, rd.Reason)
			assert.Equal(t, seq(1, 3), ids(evs))
		})
	}
	// An empty epoch before the last '-' is malformed, not foreign.
	w := serveDirect(t, h, "", http.Header{"Last-Event-Id": {"-2"}})
	assert.Equal(t, http.StatusBadRequest, w.Code)
	code, _ := errorBody(t, w)
	assert.Equal(t, sse.CodeInvalidLastEventID, code)
}
