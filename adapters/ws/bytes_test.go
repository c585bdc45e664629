package ws_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// TestBytePayloadRoundTrip: byte payloads published into the bus reach the
// WebSocket client (the resume loop over ws.Client) as the same bytes with
// the same media type, in the replay and live, beside a JSON event that
// stays JSON; a frame is the text envelope with the bytes in base64.
func TestBytePayloadRoundTrip(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	n := len(testkit.BytePayloads) + 1
	ids := testkit.PublishBytePayloads(t, s.bus, "s1") // replayed
	st := (&ws.Client{}).Subscribe(context.Background(), s.url("s1", ""), ws.StreamOptions{})
	defer st.Close()
	testkit.CheckBytePayloads(t, testkit.ReadEvents(t, st.Next, n), ids, true)
	ids = testkit.PublishBytePayloads(t, s.bus, "s1") // live
	testkit.CheckBytePayloads(t, testkit.ReadEvents(t, st.Next, n), ids, false)

	// A raw connection: the first frame is a text message, the envelope
	// with base64 data.
	c := dial(t, s.url("s1", ""))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	typ, b, err := c.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var env map[string]any
	require.NoError(t, json.Unmarshal(b, &env), "%s", b)
	require.Equal(t, "AAH/DQr+", env["data"])
	require.Equal(t, "application/octet-stream", env["contentType"])
	require.Equal(t, "base64", env["encoding"])
}
