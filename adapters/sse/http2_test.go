package sse_test

import (
	"context"
	"encoding/json"
	"io"
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

// The many-sessions stream and its change route over HTTP/2, with TLS
// and h2c (prior knowledge): the connection frame, the set's events, an
// add through POST /events/{conn} on the same connection while the
// stream is open, the added session's live events, each flushed as it
// comes (nothing waits for a buffer to fill).
func TestManySessionsOverHTTP2(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"tls", "h2c"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			for _, s := range []string{"a", "b", "c"} {
				require.NoError(t, b.CreateSession(s, ""))
			}
			h := newHandler(t, b, sse.HandlerOptions{Heartbeat: -1})
			mux := http.NewServeMux()
			mux.Handle(sse.ManyPattern, h)
			mux.Handle(sse.ChangePattern, h)
			srv := httptest.NewUnstartedServer(mux)
			client := &http.Client{}
			if mode == "tls" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
				client = srv.Client()
			} else {
				var p http.Protocols
				p.SetUnencryptedHTTP2(true)
				srv.Config.Protocols = &p
				srv.Start()
				client.Transport = &http.Transport{Protocols: &p}
			}
			t.Cleanup(srv.Close)
			t.Cleanup(func() { _ = h.Close() })

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events?session=a&session=b", nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, 2, resp.ProtoMajor, "the test needs HTTP/2")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Empty(t, resp.Header.Get("Connection"))
			dec := sse.NewDecoder(resp.Body)
			next := func() eventbus.Event {
				t.Helper()
				for {
					f, err := dec.Next()
					require.NoError(t, err)
					ev, err := sse.DecodeEvent(f)
					require.NoError(t, err)
					if ev.ID != 0 || ev.Type == resume.TypeConnection || ev.Type == resume.TypeSessionAdded {
						return ev
					}
				}
			}
			conn := next()
			require.Equal(t, resume.TypeConnection, conn.Type)
			var cd struct {
				Connection string `json:"connection"`
			}
			require.NoError(t, json.Unmarshal(conn.Data, &cd))
			for _, s := range []string{"a", "b"} {
				ev := publish(t, b, s, "m", 1)
				got := next()
				assert.Equal(t, []any{s, ev.ID}, []any{got.Session, got.ID})
			}
			add, err := client.Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(`{"add":[{"session":"c"}]}`))
			require.NoError(t, err)
			body, _ := io.ReadAll(add.Body)
			_ = add.Body.Close()
			require.Equal(t, http.StatusOK, add.StatusCode, "%s", body)
			assert.Equal(t, 2, add.ProtoMajor)
			got := next()
			assert.Equal(t, []string{resume.TypeSessionAdded, "c"}, []string{got.Type, got.Session})
			ev := publish(t, b, "c", "m", 1)
			got = next()
			assert.Equal(t, []any{"c", ev.ID}, []any{got.Session, got.ID})
		})
	}
}
