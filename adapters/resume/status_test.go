package resume_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/producer"
)

func TestStatusErrorIs(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, &resume.StatusError{Status: 410, Code: resume.CodeSessionClosed}, eventbus.ErrSessionClosed)
	assert.ErrorIs(t, &resume.StatusError{Status: 404, Code: resume.CodeSessionNotFound}, eventbus.ErrSessionNotFound)
	assert.ErrorIs(t, &resume.StatusError{Status: 429, Code: resume.CodeSubscriberLimit}, eventbus.ErrSubscriberLimit)
	assert.NotErrorIs(t, &resume.StatusError{Status: 400, Code: resume.CodeInvalidScope}, eventbus.ErrSessionClosed)
	assert.Equal(t, "resume: 400 invalid_scope: bad", (&resume.StatusError{Status: 400, Code: resume.CodeInvalidScope, Message: "bad"}).Error())
}

// StatusFor is the one mapping of the bus's errors for every route: each
// cause has one status, one code, its Retry-After and its headers, also
// when the error is wrapped; a *StatusError passes as it is.
func TestStatusForMapsEachCauseToOneCode(t *testing.T) {
	t.Parallel()
	own := &resume.StatusError{Status: 401, Code: "unauthorized"}
	stale := &producer.Error{Kind: producer.ErrStaleEpoch, Session: "s", Stamp: producer.Stamp{ID: "p", Epoch: 1}, State: producer.State{Epoch: 2}}
	gap := &producer.Error{Kind: producer.ErrSequenceGap, Session: "s", Stamp: producer.Stamp{ID: "p", Seq: 9}, Expected: 3}
	for _, tc := range []struct {
		err    error
		status int
		code   string
		retry  time.Duration
		header http.Header
		msg    string
	}{
		{fmt.Errorf("%w: session %q has 64 subscribers (the limit)", eventbus.ErrSubscriberLimit, "s"), 429, resume.CodeSubscriberLimit, 5 * time.Second, nil, `subscriber limit exceeded: session "s" has 64 subscribers (the limit)`},
		{eventbus.ErrSessionNotFound, 404, resume.CodeSessionNotFound, 0, nil, `session "s" not found`},
		{fmt.Errorf("publish: %w", eventbus.ErrSessionClosed), 410, resume.CodeSessionClosed, 0, nil, `session "s" closed`},
		{eventbus.ErrClosed, 503, resume.CodeUnavailable, 5 * time.Second, nil, "bus closed"},
		{fmt.Errorf("%w: bad type", eventbus.ErrInvalid), 400, resume.CodeInvalidArgument, 0, nil, "invalid argument: bad type"},
		{stale, 403, resume.CodeStaleProducerEpoch, 0, http.Header{"Producer-Epoch": {"2"}}, ""},
		{gap, 409, resume.CodeProducerSeqGap, 0, http.Header{"Producer-Expected-Seq": {"3"}, "Producer-Received-Seq": {"9"}}, ""},
		{producer.ErrUnsupported, 501, resume.CodeNotImplemented, 0, nil, ""},
		{context.DeadlineExceeded, 503, resume.CodeUnavailable, time.Second, nil, ""},
		{&eventbus.PositionLostError{ResyncData: frame.ResyncData{Reason: "ring_evicted", LastDeliveredID: 3, CompleteFromID: 9}}, 410, resume.CodeRingEvicted, 0, nil, ""},
		{&eventbus.PositionLostError{ResyncData: frame.ResyncData{Reason: "epoch_reset", LastDeliveredID: 3, Epoch: "e"}}, 410, resume.CodeEpochReset, 0, nil, ""},
		{errors.New("disk on fire"), 500, resume.CodeInternal, 0, nil, "disk on fire"},
		{fmt.Errorf("hook: %w", own), 401, "unauthorized", 0, nil, ""},
	} {
		t.Run(tc.code, func(t *testing.T) {
			var se *resume.StatusError
			require.ErrorAs(t, resume.StatusFor(tc.err, "s"), &se)
			assert.Equal(t, tc.status, se.Status)
			assert.Equal(t, tc.code, se.Code)
			assert.Equal(t, tc.retry, se.RetryAfter)
			assert.Equal(t, tc.header, se.Header)
			if tc.msg != "" {
				assert.Equal(t, tc.msg, se.Message)
			}
			assert.NotContains(t, se.Message, "eventbus:", "no Go package prefix")
		})
	}
	assert.Nil(t, resume.StatusFor(nil, "s"))
}

// WriteError writes the answer: status, JSON code and message, Retry-After
// and the StatusError's own headers (which win over Answer's defaults,
// such as a 405's Allow).
func TestWriteErrorWritesTheAnswer(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	resume.WriteError(w, eventbus.ErrClosed, "s")
	assert.Equal(t, 503, w.Code)
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"code":"unavailable","message":"bus closed"}`, w.Body.String())
	assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))

	w = httptest.NewRecorder()
	resume.WriteError(w, &resume.StatusError{Status: 405, Code: resume.CodeMethodNotAllowed,
		Header: http.Header{"Allow": {"GET, HEAD"}}}, "s")
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))

	w = httptest.NewRecorder()
	resume.WriteError(w, nil, "s")
	assert.Equal(t, 200, w.Code, "nothing written")
	assert.Zero(t, w.Body.Len())
}

// An error body is read by people and by scripts as it stands: '&', '<'
// and '>' in a message are written as themselves, not as \u0026, \u003c,
// \u003e (encoding/json's HTML escaping, which a JSON body never needs).
func TestErrorBodiesDoNotEscapeHTML(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{`a & b`, `<script>`, `turn "x&y<z>" of session "s"`, "line\nbreak \u2028"} {
		w := httptest.NewRecorder()
		(&resume.StatusError{Status: 409, Code: resume.CodeTurnEnded, Message: msg}).Answer(w)
		body := w.Body.String()
		assert.NotContains(t, body, `\u0026`, msg)
		assert.NotContains(t, body, `\u003c`, msg)
		assert.NotContains(t, body, `\u003e`, msg)
		var got struct{ Code, Message string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), body)
		assert.Equal(t, msg, got.Message)
		assert.True(t, strings.HasSuffix(body, "}\n"), "one newline after the object: %q", body)
		assert.Equal(t, 1, strings.Count(body, "\n"), "one newline only: %q", body)
	}
}
