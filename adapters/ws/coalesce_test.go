package ws_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// A merged event of a coalescing subscription (?coalesce=acp, parsed by
// resume.ParseRequest for both transports) keeps its count and first id on
// the WebSocket envelope.
func TestFrameCarriesCoalescedCount(t *testing.T) {
	ev := eventbus.Event{ID: 9, Session: "s1", Type: "agent_message_chunk", Data: []byte(`{"a":1}`), Count: 4, FirstID: 6}
	got, epoch, err := ws.DecodeFrame(resume.AppendEnvelope(nil, ev, "E1"))
	require.NoError(t, err)
	assert.Equal(t, "E1", epoch)
	assert.Equal(t, ev.ID, got.ID)
	assert.Equal(t, 4, got.Count)
	assert.EqualValues(t, 6, got.FirstID)

	plain := eventbus.Event{ID: 10, Session: "s1", Type: "x"}
	b := resume.AppendEnvelope(nil, plain, "")
	assert.NotContains(t, string(b), "count")
	got, _, err = ws.DecodeFrame(b)
	require.NoError(t, err)
	assert.Zero(t, got.Count)
}
