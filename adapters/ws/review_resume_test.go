package ws_test

import (
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// Review: a connection whose URL (or Last-Event-ID header) carries a cursor
// and whose first message is a resume with a cursor was closed 1008 "resume
// too late: send it first, within the resume wait" — but it was sent first;
// the handler's own "the URL already carries one" reason was unreachable.
// The close now names the real conflict; a resume without a cursor stays
// accepted.
func TestReviewResumeWithURLCursorNamesTheConflict(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	publish(t, s.bus, "s1", 3)

	c := dial(t, s.url("s1", "lastEventId=1"))
	send(t, c, `{"resume":{"lastEventId":"2"}}`)
	ce, _ := readClose(t, c)
	assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	assert.Contains(t, ce.Reason, "the URL already carries one")
	assert.NotContains(t, ce.Reason, "too late")

	ok := dial(t, s.url("s1", "lastEventId=1"))
	send(t, ok, `{"resume":{}}`)
	ev := read(t, ok)
	assert.EqualValues(t, 2, ev.ID, "the URL's cursor counts")
}
