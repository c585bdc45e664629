package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/agent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Plan refuses what is not a message, naming the value, and takes the
// bounds themselves.
func TestPlanBounds(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"":                                   "empty text",
		" \n\t":                              "empty text",
		strings.Repeat("x", agent.MaxText+1): "text of 16385 bytes is over 16384",
		"stream 0":                           `stream count "0" (want a number from 1 to 100000)`,
		"stream 100001":                      `stream count "100001"`,
		"stream -3":                          `stream count "-3"`,
		"stream 1e3":                         `stream count "1e3"`,
	} {
		_, err := agent.Plan(text)
		assert.ErrorIs(t, err, eventbus.ErrInvalid, "%.20q", text)
		assert.ErrorContains(t, err, want, "%.20q", text)
	}
	for text, n := range map[string]int{"stream 1": 3, "stream 100000": agent.MaxStream + 2, "  stream   42 ": 44} {
		r, err := agent.Plan(text)
		require.NoError(t, err, text)
		assert.Equal(t, n, r.Len(), text)
	}
	r, err := agent.Plan(strings.Repeat("x", agent.MaxText))
	require.NoError(t, err)
	assert.Positive(t, r.Len())
}

// Run publishes the reply in the turn and ends it; a reply run twice, in
// two sessions, publishes the same types and texts (the payloads differ
// only in their sessionId).
func TestRunPublishesTheReplyInItsTurn(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, err)
	defer bus.Close()
	var got [2][]string
	for i, s := range []string{"a", "b"} {
		require.NoError(t, bus.CreateSession(s, ""))
		tr, err := bus.StartTurn(context.Background(), s, eventbus.TurnOptions{})
		require.NoError(t, err)
		r, err := agent.Plan("how are turns cancelled?")
		require.NoError(t, err)
		require.NoError(t, r.Run(tr, 1e5))
		end, err := tr.End(nil)
		require.NoError(t, err)
		assert.Contains(t, string(end.Data), `"reason":"complete"`)
		sub, err := bus.Subscribe(context.Background(), s, eventbus.SubscribeOptions{})
		require.NoError(t, err)
		for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
			got[i] = append(got[i], ev.Type+" "+strings.Replace(string(ev.Data), `"sessionId":"`+s+`"`, "", 1))
		}
		sub.Close()
		assert.Len(t, got[i], r.Len()+2, "turn_start, the reply, turn_end")
	}
	assert.Equal(t, got[0][1:len(got[0])-1], got[1][1:len(got[1])-1])
}

// Run stops as soon as its turn is cancelled and publishes nothing after.
func TestRunStopsAtTheCancel(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("s", ""))
	tr, err := bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	r, err := agent.Plan("stream 100000")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Run(tr, 1000) }()
	_, err = bus.Cancel(context.Background(), "s", frame.TurnData{})
	require.NoError(t, err)
	require.NoError(t, <-done)
	info, ok := bus.Turn("s", "t")
	require.True(t, ok)
	assert.Equal(t, "cancelled", info.Reason)
	assert.Equal(t, info.EndID, bus.LastEventID(), "nothing after the turn_end")
}

// ExamplePlan: "stream N" is N deltas, then a tool call and its result.
func ExamplePlan() {
	r, _ := agent.Plan("stream 3")
	fmt.Println(r.Len())
	_, err := agent.Plan("stream 0")
	fmt.Println(err)
	// Output:
	// 5
	// eventbus: invalid argument: stream count "0" (want a number from 1 to 100000)
}
