package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Issue 27.10: a late joiner without a cursor on a reply longer than the
// replay buffer got the reply from its middle. The example server compacts
// ACP replies by default (a program default of config.LoadWithDefaults, so
// AGENTPOOL_EVENTBUS_REPLAY_COMPACT=off still turns it off): the joiner
// gets the reply whole, as one replayed record. With it off, the replay's
// end frame says that older history is gone.
func TestExampleServerCompactsACPRepliesByDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compact string // AGENTPOOL_EVENTBUS_REPLAY_COMPACT
	}{{"default", ""}, {"off", "off"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PORT", "")
			t.Setenv("AGENTPOOL_EVENTBUS_REPLAY_COMPACT", tc.compact)
			t.Setenv("AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", "20")
			base, _, stop := startRun(t)
			defer stop()
			post := func(path, body string) {
				resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
				require.NoError(t, err)
				resp.Body.Close()
				require.Less(t, resp.StatusCode, 300, "%s %s", path, body)
			}
			post("/sessions", `{"id":"r"}`)
			var reply strings.Builder
			for i := range 50 { // a reply of 50 deltas, a ring of 20
				tok := string(rune('a'+i%26)) + " "
				reply.WriteString(tok)
				post("/session/r/events", `{"type":"agent_message_chunk","data":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+tok+`"}}}}`)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := sse.Subscribe(ctx, base+"/session/r/events", sse.StreamOptions{})
			defer st.Close()
			ev, err := st.Next()
			require.NoError(t, err)
			if tc.compact == "" {
				require.Equal(t, "agent_message_chunk", ev.Type)
				assert.True(t, ev.Replay)
				assert.Equal(t, 50, ev.Count, "the whole reply in one record")
				var d struct {
					Update struct {
						Content struct{ Text string }
					}
				}
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				assert.Equal(t, reply.String(), d.Update.Content.Text)
				return
			}
			assert.EqualValues(t, 31, ev.ID, "off: the reply from its middle (the ring's last 20 of 50)")
			for ev.Type != frame.TypeReplayComplete {
				ev, err = st.Next()
				require.NoError(t, err)
			}
			var done frame.ReplayCompleteData
			require.NoError(t, json.Unmarshal(ev.Data, &done))
			assert.Equal(t, frame.ReplayCompleteData{LastReplayedEventID: 50, ReplayedCount: 20, FirstReplayedEventID: 31, HistoryLost: true}, done,
				"and the end of the replay says older history is gone")
		})
	}
}
