package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// Issue 12.4: over HTTP/2 (TLS), a write deadline left on a stream after the
// write it guarded resets the stream once it passes, even though nothing is
// being written. A quiet period longer than WriteTimeout must not cut the
// stream: the second event still arrives on the same response.
func TestHandlerHTTP2QuietStreamOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s1", ""))
	const wt = 400 * time.Millisecond // generous: a loaded machine must not miss it on the writes themselves
	h := newHandler(t, b, sse.HandlerOptions{WriteTimeout: wt, Heartbeat: -1})
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/session/s1/events?replay=0", nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor, "the test needs HTTP/2")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	dec := sse.NewDecoder(resp.Body)
	f, err := dec.Next()
	require.NoError(t, err)
	require.Equal(t, resume.TypeStreamStart, f.Event, "a live-only stream opens with where it starts")
	next := func() (uint64, error) {
		f, err := dec.Next()
		if err != nil {
			return 0, err
		}
		ev, err := sse.DecodeEvent(f)
		return ev.ID, err
	}
	first := publish(t, b, "s1", "a", 1)
	id, err := next()
	require.NoError(t, err)
	require.Equal(t, first.ID, id)

	time.Sleep(3 * wt) // quiet: longer than the write deadline
	second := publish(t, b, "s1", "b", 2)
	id, err = next()
	require.NoError(t, err, "the quiet HTTP/2 stream was cut")
	assert.Equal(t, second.ID, id)
	assert.Zero(t, h.Stats().WriteErrors)
}

// TestHandlerHTTP2StreamThatNeverReadsIsFreed (an attacker over HTTP/2 +
// TLS): a client that opens a stream and never
// reads it fills the stream's flow-control window; the handler's write then
// blocks. The write deadline must end that stream and free its subscriber,
// and a second stream on the same connection must keep working.
func TestHandlerHTTP2StreamThatNeverReadsIsFreed(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxQueueSize: 100000, MaxQueuedBytes: 256 << 20})
	require.NoError(t, b.CreateSession("s1", ""))
	const wt = 300 * time.Millisecond
	h := newHandler(t, b, sse.HandlerOptions{WriteTimeout: wt, Heartbeat: -1})
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	client := srv.Client()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/session/s1/events?replay=0", nil)
	require.NoError(t, err)
	stalled, err := client.Do(req)
	require.NoError(t, err)
	defer stalled.Body.Close()
	require.Equal(t, 2, stalled.ProtoMajor, "the test needs HTTP/2")
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	// 16 MiB of events: over what Go's HTTP/2 client buffers per stream
	// (4 MiB), within the live queue (so no eviction): only the write
	// deadline can free the stream.
	payload := strings.Repeat("x", 4096)
	for range 4096 {
		publish(t, b, "s1", "big", payload)
	}
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 0 }, 20*wt+5*time.Second, 10*time.Millisecond,
		"the stalled stream's subscriber is freed")
	require.Eventually(t, func() bool { return h.Stats().Active == 0 }, 5*time.Second, 10*time.Millisecond,
		"the stalled stream's handler returned")
	assert.Zero(t, b.Stats().Evicted, "freed by the write deadline, not by the queue")

	// The same connection still serves a new stream.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	req2, err := http.NewRequestWithContext(ctx2, http.MethodGet, srv.URL+"/session/s1/events?replay=0", nil)
	require.NoError(t, err)
	resp, err := client.Do(req2)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)
	ev := publish(t, b, "s1", "after", 1)
	dec := sse.NewDecoder(resp.Body)
	for {
		f, err := dec.Next()
		require.NoError(t, err, "the second stream on the connection was starved")
		got, err := sse.DecodeEvent(f)
		require.NoError(t, err)
		if got.ID == ev.ID {
			break
		}
	}
	assert.Equal(t, 1, b.Stats().Subscribers)
}
