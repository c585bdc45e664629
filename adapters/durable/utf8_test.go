package durable_test

import (
	"context"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// A JSON stream's messages become JSON events that the SSE and WebSocket
// routes carry as text: JSON that is not UTF-8 (encoding/json's json.Valid
// lets invalid bytes inside strings through) is refused with 400
// invalid_json naming where, on a PUT's initial body and on an append,
// and nothing of the request is stored; a session created elsewhere and
// read as a JSON stream is protected the same way. A WebSocket text frame
// that is not UTF-8 makes a browser fail the connection (RFC 6455 §8.1),
// and the replay would send it again on every reconnect.
func TestJSONStreamRefusesInvalidUTF8(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	resp, body := r.do(t, http.MethodPut, "j", "[\"ok\",\"\xff\"]", "Content-Type", "application/json")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.Contains(t, body, "invalid_json")
	assert.Contains(t, body, "UTF-8 at byte 7")
	resp, body = r.do(t, http.MethodPut, "j", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.NoError(t, r.bus.CreateSession("other", ""))
	for _, name := range []string{"j", "other"} {
		for _, bad := range []string{"\"\xff\"", "[\"fine\", \"\xc3\x28\"]", "{\"k\xed\xa0\x80\":1}"} {
			resp, body = r.do(t, http.MethodPost, name, bad, "Content-Type", "application/json")
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %q: %s", name, bad, body)
			assert.Contains(t, body, "invalid_json")
		}
	}
	resp, body = r.do(t, http.MethodPost, "j", `["é", 2]`, "Content-Type", "application/json")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	sub, err := r.bus.Subscribe(context.Background(), "j", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	for _, want := range []string{`"é"`, `2`} {
		ev, err := sub.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, want, string(ev.Data), "only the valid append was stored")
		assert.True(t, utf8.Valid(ev.Data))
	}
}
