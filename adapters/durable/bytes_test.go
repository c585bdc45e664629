package durable_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// TestByteStreamRoundTrip: a byte stream's appends go into the bus as byte
// payloads of the stream's content type (no base64 in JSON), and come out
// as the same bytes: catch-up, long-poll, and SSE (base64, as PROTOCOL.md
// asks); a bus subscriber sees the bytes and the media type.
func TestByteStreamRoundTrip(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	parts := []string{"\x00\x01\xff", "line\r\nbreak\n", `{"json":"bytes"}`}
	resp, _ := r.do(t, http.MethodPut, "bin", parts[0], "Content-Type", "application/octet-stream")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	for _, p := range parts[1:] {
		resp, _ = r.do(t, http.MethodPost, "bin", p, "Content-Type", "application/octet-stream")
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}

	// In the bus: byte payloads with the stream's media type.
	sub, err := r.bus.Subscribe(context.Background(), "bin", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	for _, p := range parts {
		ev, err := sub.Next(context.Background())
		require.NoError(t, err)
		assert.False(t, ev.IsJSON())
		assert.Equal(t, "application/octet-stream", ev.ContentType())
		assert.Equal(t, p, string(ev.Data))
	}

	all := strings.Join(parts, "")
	resp, body := r.do(t, http.MethodGet, "bin?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, all, body, "catch-up")
	assert.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))

	resp, body = r.do(t, http.MethodGet, "bin?offset=-1&live=long-poll", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, all, body, "long-poll")

	resp, _ = r.do(t, http.MethodPost, "bin", "", "Stream-Closed", "true")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	res, err := http.Get(r.url + "bin?live=sse&offset=-1")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, "base64", res.Header.Get("Stream-SSE-Data-Encoding"))
	var got []byte
	sc := bufio.NewScanner(res.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok && event == "data" {
			b, err := base64.StdEncoding.DecodeString(d)
			require.NoError(t, err, "%q", d)
			got = append(got, b...)
		}
	}
	assert.Equal(t, all, string(got), "SSE")
}

// Events of another kind than the stream's read as the envelope: a byte
// payload on a JSON stream with its bytes in base64 and its media type;
// a JSON event of another type on a byte stream as its JSON line.
func TestByteEventsOfOtherRoutes(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	_, err := r.bus.PublishBytes("j", "blob", "image/png", []byte{0x89, 'P'}, eventbus.WithOrigin("o"))
	require.NoError(t, err)
	_, err = r.bus.PublishJSON("j", durable.DefaultEventType, []byte(`{"a":1}`))
	require.NoError(t, err)
	resp, body := r.do(t, http.MethodGet, "j?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &items), body)
	require.Len(t, items, 2)
	assert.Equal(t, map[string]any{"v": float64(1), "id": float64(1), "type": "blob", "session": "j", "data": "iVA=",
		"contentType": "image/png", "encoding": "base64", "origin": "o"}, items[0], "the SSE and WebSocket routes' envelope")
	assert.Equal(t, map[string]any{"a": float64(1)}, items[1])

	resp, _ = r.do(t, http.MethodPut, "t", "", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = r.do(t, http.MethodPost, "t", "hi ", "Content-Type", "text/plain")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	ev, err := r.bus.Publish("t", "note", map[string]int{"n": 2})
	require.NoError(t, err)
	resp, body = r.do(t, http.MethodGet, "t?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `hi {"v":1,"id":`+itoa(int64(ev.ID))+`,"type":"note","session":"t","data":{"n":2}}`+"\n", body)
}

// A JSON append is at most durable's 10,000 messages (a top-level array
// flattened): one more is 413 body_too_large naming the count and the cap,
// and nothing of it is stored. An 8 MiB body of 4 million one-byte
// messages took 45 s of publishing under the stream's lock and 330 MB,
// and its answer came after the write deadline (no answer: the client
// retries it, a duplicate). A create's body (PUT) has the same cap.
func TestAJSONAppendOfTooManyMessagesIsRefused(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1", ReplayBufferSize: 20000}, durable.HandlerOptions{})
	js := []string{"Content-Type", "application/json"}
	array := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	resp, body := r.do(t, http.MethodPut, "s", array(10001), js...)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", body)
	resp, _ = r.do(t, http.MethodPut, "s", "", js...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	resp, body = r.do(t, http.MethodPost, "s", array(10001), js...)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, body, `"body_too_large"`)
	assert.Contains(t, body, "more than 10000 messages")
	resp, body = r.do(t, http.MethodGet, "s?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "[]", body, "nothing of it stored")

	resp, _ = r.do(t, http.MethodPost, "s", array(10000), js...)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "the cap itself is taken")
}
