package durable_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// lifecycle is the contract every handler keeps under the same names.
type lifecycle interface {
	Close() error
	Shutdown(ctx context.Context) error
}

var (
	_ lifecycle = (*durable.Handler)(nil)
	_ lifecycle = (*sse.Handler)(nil)
	_ lifecycle = (*ws.Handler)(nil)
)

// Close, as on the SSE and WebSocket handlers: new requests are refused
// (503 unavailable, Retry-After 5, which a Durable Streams client retries),
// open reads end at once — a waiting long-poll answers 503, an SSE answer
// ends — without waiting for them; Shutdown then returns once every
// request has returned. The streams themselves stay.
func TestCloseEndsReadsAndRefusesRequests(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{LongPollTimeout: time.Minute, SSEDuration: time.Minute})
	resp, _ := r.do(t, http.MethodPut, "s", `{"n":1}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	tail := resp.Header.Get("Stream-Next-Offset")

	longPoll := make(chan *http.Response, 1)
	go func() {
		resp, _ := r.do(t, http.MethodGet, "s?live=long-poll&offset="+tail, "")
		longPoll <- resp
	}()
	res, err := http.Get(r.url + "s?live=sse&offset=" + tail)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(r.bus)["s"] == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 2, r.h.Stats().Active)

	require.NoError(t, r.h.Close())
	select {
	case resp := <-longPoll:
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the long-poll")
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not end at Close")
	}
	_, err = io.Copy(io.Discard, bufio.NewReader(res.Body))
	assert.NoError(t, err, "the SSE answer ends")

	resp, body := r.do(t, http.MethodGet, "s?offset=-1", "")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.Contains(t, body, `"unavailable"`)
	resp, _ = r.do(t, http.MethodPost, "s", `{"n":2}`, "Content-Type", "application/json")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "appends too")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.h.Shutdown(ctx))
	assert.Zero(t, r.h.Stats().Active)
	assert.True(t, r.bus.SessionExists("s"), "the stream stays")
	require.NoError(t, r.h.Close(), "idempotent")
}

// Stats counts what the handler did, by kind.
func TestStatsCountTheHandlersWork(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{Subscriptions: true})
	defer r.h.Close()
	ct := []string{"Content-Type", "application/json"}
	resp, _ := r.do(t, http.MethodPut, "s", `[1,2]`, ct...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = r.do(t, http.MethodPost, "s", `3`, ct...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = r.do(t, http.MethodGet, "s?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = r.do(t, http.MethodGet, "s?offset=-1&live=long-poll", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = r.do(t, http.MethodPost, "s", "", "Stream-Closed", "true")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = r.do(t, http.MethodGet, "s?offset=-1&live=sse", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = r.do(t, http.MethodGet, "nobody?offset=-1", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = r.do(t, http.MethodPut, "__ds/subscriptions/p", `{"type":"pull-wake","streams":["s"],"wake_stream":"s"}`, ct...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	assert.Equal(t, durable.Stats{Streams: 1, Subscriptions: 1, Started: 6, Rejected: 1, Appended: 3,
		Reads: 1, LongPolls: 1, SSE: 1}, r.h.Stats())
}
