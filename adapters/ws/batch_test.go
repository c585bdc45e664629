package ws_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Every frame arrives whole and in order, whatever its size (the three
// lengths of a WebSocket header: under 126 bytes, up to 64 KiB, over it),
// to two connections that share the handler's encoding of each event, one
// of which replays them (its frames carry "replay":true, the other's do
// not); a pong answers a ping message in the middle of the stream.
// coder/websocket frames every message from the cached envelope; the same
// holds with and without permessage-deflate.
func TestFramesOfEverySizeInOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept *websocket.AcceptOptions
		dial   *websocket.DialOptions
	}{
		{name: "uncompressed"},
		{name: "compressed",
			accept: &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover},
			dial:   &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, eventbus.Options{}, ws.HandlerOptions{Accept: tc.accept})
			require.NoError(t, s.bus.CreateSession("s1", ""))
			dialOpts := func(url string) *websocket.Conn {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				defer cancel()
				c, resp, err := websocket.Dial(ctx, url, tc.dial)
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.CloseNow() })
				assert.Equal(t, tc.accept != nil, resp.Header.Get("Sec-WebSocket-Extensions") != "", "compression negotiated")
				c.SetReadLimit(1 << 20)
				return c
			}
			live := dialOpts(s.url("s1", "replay=0"))
			send(t, live, `{"resume":{}}`)
			assert.Equal(t, resume.TypeStreamStart, read(t, live).Type)

			var want []json.RawMessage
			for _, n := range []int{1, 100, 300, 70_000, 5, 2_000} {
				data, err := json.Marshal(map[string]string{"s": strings.Repeat("x", n)})
				require.NoError(t, err)
				want = append(want, data)
			}
			var ids []uint64
			for i, data := range want {
				ev, err := s.bus.PublishJSON("s1", "msg", data)
				require.NoError(t, err)
				ids = append(ids, ev.ID)
				if i == 2 {
					send(t, live, `{"ping":{"n":7}}`)
				}
			}
			replay := dialOpts(s.url("s1", "lastEventId=0"))

			pongs := 0
			// The pong may come after the last event: the reader answers
			// the ping while the writer sends the events.
			for i := 0; i < len(want) || pongs == 0; {
				ev := read(t, live)
				if ev.Type == ws.TypePong {
					assert.JSONEq(t, `{"n":7}`, string(ev.Data))
					pongs++
					continue
				}
				require.Less(t, i, len(want), "a frame after the events: %s", ev.Type)
				assert.Equal(t, eventbus.Event{ID: ids[i], Session: "s1", Type: "msg", Data: want[i]}, ev, "live frame %d", i)
				i++
			}
			assert.Equal(t, 1, pongs)
			for i := range want {
				assert.Equal(t, eventbus.Event{ID: ids[i], Session: "s1", Type: "msg", Data: want[i], Replay: true},
					read(t, replay), "replayed frame %d", i)
			}
			assert.Equal(t, frame.TypeReplayComplete, read(t, replay).Type)
			// stream_start, the events twice, replay_complete (a pong is
			// counted apart); counted once written, after the client read it.
			require.Eventually(t, func() bool { return s.h.Stats().Frames == uint64(2*len(want)+2) }, waitFor, time.Millisecond,
				"frames: %d", s.h.Stats().Frames)
			assert.EqualValues(t, 1, s.h.Stats().Pongs)
		})
	}
}
