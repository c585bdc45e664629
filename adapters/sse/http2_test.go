package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
