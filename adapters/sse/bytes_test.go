package sse_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// TestBytePayloadRoundTrip: byte payloads published into the bus reach the
// SSE client (the resume loop over sse.Client) as the same bytes with the
// same media type, in the replay and live, beside a JSON event that stays
// JSON; the wire carries them as base64 in the envelope, never raw.
func TestBytePayloadRoundTrip(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
	n := len(testkit.BytePayloads) + 1
	ids := testkit.PublishBytePayloads(t, b, "s1") // replayed
	st := (&sse.Client{}).Subscribe(t.Context(), srv.URL+"/session/s1/events", sse.StreamOptions{})
	defer st.Close()
	testkit.CheckBytePayloads(t, testkit.ReadEvents(t, st.Next, n), ids, true)
	ids = testkit.PublishBytePayloads(t, b, "s1") // live
	testkit.CheckBytePayloads(t, testkit.ReadEvents(t, st.Next, n), ids, false)

	// On the wire: base64 in the envelope, one data: line per frame.
	raw := openRaw(t, srv.URL+"/session/s1/events", nil)
	fr, err := raw.dec.Next()
	require.NoError(t, err)
	require.False(t, strings.ContainsAny(string(fr.Data), "\r\n"))
	var env map[string]any
	require.NoError(t, json.Unmarshal(fr.Data, &env))
	require.Equal(t, "AAH/DQr+", env["data"])
	require.Equal(t, "application/octet-stream", env["contentType"])
	require.Equal(t, "base64", env["encoding"])
}
