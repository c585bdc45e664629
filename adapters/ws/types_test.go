package ws_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// ?types= selects the event types of the replay and of the live stream,
// as over SSE (one parser, resume.ParseRequest).
func TestHandlerTypesQuery(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	pub := func(typ string) uint64 {
		ev, err := s.bus.Publish("s1", typ, map[string]int{"n": 1})
		require.NoError(t, err)
		return ev.ID
	}
	a1 := pub("a")
	pub("b")
	c := dial(t, s.url("s1", "types=a&lastEventId=0"))
	assert.Equal(t, a1, read(t, c).ID)
	assert.Equal(t, frame.TypeReplayComplete, read(t, c).Type)
	pub("b")
	a2 := pub("a")
	assert.Equal(t, a2, read(t, c).ID, "the live b is not sent")
}
