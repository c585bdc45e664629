package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// readCancelResult reads frames until the cancel_result and returns its
// data and the types of the frames read before it.
func readCancelResult(t testing.TB, c *websocket.Conn) (map[string]any, []string) {
	t.Helper()
	var before []string
	for {
		ev := read(t, c)
		if ev.Type != ws.TypeCancelResult {
			before = append(before, ev.Type)
			continue
		}
		assert.Zero(t, ev.ID, "an answer, not an event: no id")
		var d map[string]any
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		return d, before
	}
}

// A cancel message is answered on its socket with a cancel_result frame
// carrying what POST /session/{id}/cancel answers; an error answer leaves
// the connection open, and a refused cancel writes nothing to the log.
func TestCancelMessageAnswersAsTheRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, msg string
		hook      func(*http.Request, string, *frame.TurnData) error
		want      string
		ended     bool // the running turn ended
	}{
		{name: "the session's active turn", msg: `{"type":"cancel"}`, want: `{"status":202,"cancelled":["running"],"held":[]}`, ended: true},
		{name: "the named turn", msg: `{"type":"cancel","turn":"running"}`, want: `{"status":202,"cancelled":["running"],"held":[]}`, ended: true},
		{name: "cascade", msg: `{"type":"cancel","cascade":true}`, want: `{"status":202,"cancelled":["running","child-turn"],"held":[]}`, ended: true},
		{name: "a turn not yet started is held", msg: `{"type":"cancel","turn":"later"}`, want: `{"status":202,"cancelled":[],"held":["later"]}`},
		{name: "an ended turn", msg: `{"type":"cancel","turn":"done"}`,
			want: `{"status":409,"code":"turn_ended","message":"turn ended: turn \"done\" of session \"s\""}`},
		{name: "a bad turn id", msg: `{"type":"cancel","turn":"a\u0007b"}`,
			want: `{"status":400,"code":"invalid_turn_id","message":"invalid turn: turn id \"a\\ab\" contains control character '\\a'"}`},
		{name: "the hook refuses", msg: `{"type":"cancel"}`, hook: func(r *http.Request, session string, c *frame.TurnData) error {
			return errors.New("tab " + c.By + " may not stop " + session + " (" + r.URL.Query().Get("client") + ")")
		}, want: `{"status":403,"code":"forbidden","message":"tab tab-1 may not stop s (tab-1)"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1, AuthorizeCancel: tc.hook})
			require.NoError(t, s.bus.CreateSession("s", ""))
			require.NoError(t, s.bus.CreateSession("child", "s"))
			done, err := s.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "done"})
			require.NoError(t, err)
			_, err = done.End(nil)
			require.NoError(t, err)
			running, err := s.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "running"})
			require.NoError(t, err)
			_, err = s.bus.StartTurn(context.Background(), "child", eventbus.TurnOptions{ID: "child-turn"})
			require.NoError(t, err)
			before := s.bus.LastEventID()

			c := dial(t, s.url("s", "replay=0&client=tab-1"))
			assert.Equal(t, "stream_start", read(t, c).Type)
			send(t, c, tc.msg)
			d, _ := readCancelResult(t, c)
			b, _ := json.Marshal(d)
			assert.JSONEq(t, tc.want, string(b))
			if tc.ended {
				<-running.Context().Done()
				info, ok := s.bus.Turn("s", "running")
				require.True(t, ok)
				assert.Equal(t, frame.ReasonCancelled, info.Reason)
			} else {
				assert.NoError(t, running.Context().Err())
			}
			if d["status"].(float64) >= 400 {
				assert.Equal(t, before, s.bus.LastEventID(), "nothing written to the log")
			}
			send(t, c, `{"ping":1}`) // the connection is still open
			for ev := read(t, c); ev.Type != ws.TypePong; ev = read(t, c) {
			}
			if !tc.ended {
				return
			}
			// The cancel is recorded with the connection's client id.
			sub, err := s.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: eventbus.At(before)})
			require.NoError(t, err)
			defer sub.Close()
			ev, ok := sub.TryNext()
			require.True(t, ok)
			assert.Equal(t, frame.TypeTurnCancel, ev.Type)
			var cd frame.TurnData
			require.NoError(t, json.Unmarshal(ev.Data, &cd))
			assert.Equal(t, "tab-1", cd.By)
			assert.EqualValues(t, 1, s.h.Stats().Cancels)
		})
	}
}

// A cancel message sent first, while the handler waits for a resume
// message, ends the wait (the stream starts as the URL says) and is
// answered.
func TestCancelMessageFirst(t *testing.T) {
	t.Parallel()
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s", ""))
	tr, err := s.bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	c := dial(t, s.url("s", ""))
	send(t, c, `{"type":"cancel","turn":"t1"}`)
	d, before := readCancelResult(t, c)
	assert.EqualValues(t, 202, d["status"])
	<-tr.Context().Done()
	// The replay (turn_start, maybe the cancel and the end) may come
	// before or after the answer; every one of them arrives.
	seen := map[string]bool{}
	for _, typ := range before {
		seen[typ] = true
	}
	for !seen[frame.TypeTurnEnd] {
		seen[read(t, c).Type] = true
	}
	assert.True(t, seen[frame.TypeTurnStart])
}
