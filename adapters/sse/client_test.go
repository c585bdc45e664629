package sse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// canned serves bodies[i] as an SSE response to the i-th request, then 410
// session_closed; it records the requests' headers.
type canned struct {
	bodies  []string
	mu      sync.Mutex
	headers []http.Header
}

func (c *canned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	i := len(c.headers)
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	if i >= len(c.bodies) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"code":"session_closed","message":"session \"s1\" closed"}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set(sse.HeaderEpoch, "EP")
	_, _ = io.WriteString(w, c.bodies[i])
}

func (c *canned) header(i int) http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.headers[i]
}

// readAll reads a stream until it stops and returns the frames and the
// reason.
func readAll(t *testing.T, s *sse.Stream) ([]eventbus.Event, error) {
	t.Helper()
	var out []eventbus.Event
	for {
		ev, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestClientParsesLineEnds(t *testing.T) {
	t.Parallel()
	wire := func(ev eventbus.Event) string { return string(sse.AppendEvent(nil, ev, sse.EncodeOptions{})) }
	e1 := eventbus.Event{ID: 1, Session: "s1", Type: "a", Data: []byte(`{"x":"1\n2"}`)}
	e2 := eventbus.Event{Session: "s1", Type: frame.TypeReplayComplete, Data: []byte(`{"lastReplayedEventId":1,"replayedCount":1}`)}
	e3 := eventbus.Event{ID: 2, Session: "s1", Type: "b", Data: []byte("{\n\"y\": [1,\n2]\n}"), Replay: true, Origin: "me"}
	lf := "\xEF\xBB\xBFretry: 1\n: heartbeat\n\n" + wire(e1) + wire(e2) + wire(e3) + wire(eventbus.Event{Session: "s1", Type: frame.TypeSlowClientWarning, Data: []byte(`{}`)})
	variants := map[string]string{
		"LF":   lf,
		"CRLF": string(bytes.ReplaceAll([]byte(lf), []byte("\n"), []byte("\r\n"))),
		"CR":   string(bytes.ReplaceAll([]byte(lf), []byte("\n"), []byte("\r"))),
	}
	for name, body := range variants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := &canned{bodies: []string{body}}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			s := (&sse.Client{Retry: time.Hour}).Subscribe(t.Context(), ts.URL+"/session/s1/events", sse.StreamOptions{})
			defer s.Close()
			evs, err := readAll(t, s)

			var se *sse.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusGone, se.Status)
			assert.Equal(t, sse.CodeSessionClosed, se.Code)
			assert.ErrorIs(t, err, eventbus.ErrSessionClosed)

			require.Len(t, evs, 4)
			assert.Equal(t, e1, evs[0])
			assert.Equal(t, e2, evs[1])
			assert.Equal(t, frame.TypeSlowClientWarning, evs[3].Type)
			assert.Equal(t, e3.ID, evs[2].ID)
			assert.JSONEq(t, string(e3.Data), string(evs[2].Data))
			assert.True(t, evs[2].Replay)
			assert.Equal(t, "me", evs[2].Origin)

			assert.Empty(t, srv.header(0).Get("Last-Event-ID"))
			assert.Equal(t, "text/event-stream", srv.header(0).Get("Accept"))
			assert.Equal(t, "2", srv.header(1).Get("Last-Event-ID"), "the synthetic frame after id 2 does not move the cursor")
			assert.Equal(t, "EP", srv.header(1).Get(sse.HeaderEpoch), "the epoch the server announced is sent back")
			assert.Equal(t, "2", s.LastEventID())
			assert.Equal(t, "EP", s.Epoch())
		})
	}
}

func TestClientInitialCursorAndHeaders(t *testing.T) {
	t.Parallel()
	srv := &canned{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := &sse.Client{Header: http.Header{"Authorization": {"Bearer x"}}}
	s := c.Subscribe(t.Context(), ts.URL+"/x", sse.StreamOptions{LastEventID: "E-5", Epoch: "E"})
	_, err := s.Next()
	require.Error(t, err)
	assert.Equal(t, "E-5", srv.header(0).Get("Last-Event-ID"))
	assert.Equal(t, "E", srv.header(0).Get(sse.HeaderEpoch))
	assert.Equal(t, "Bearer x", srv.header(0).Get("Authorization"))
}

func TestClientRetriesServerErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1, 2:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 3:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 1\n\nid: 7\ndata: {\"v\":1,\"id\":7,\"type\":\"t\",\"session\":\"s\"}\n\n")
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer ts.Close()
	s := (&sse.Client{Retry: time.Millisecond, MaxBackoff: 10 * time.Millisecond}).Subscribe(t.Context(), ts.URL, sse.StreamOptions{})
	ev, err := s.Next()
	require.NoError(t, err)
	assert.EqualValues(t, 7, ev.ID)
	_, err = s.Next()
	var se *sse.StatusError
	require.ErrorAs(t, err, &se, "a 200 that is not text/event-stream stops the stream")
	assert.Equal(t, "invalid_content_type", se.Code)
	assert.EqualValues(t, 4, calls.Load())
	assert.Equal(t, 1, s.Connects())
}

func TestClientStopsOn4xx(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	for _, tt := range []struct{ path, code string }{
		{"/session/nope/events", sse.CodeSessionNotFound},
		{"/session/s1/events?scope=x", sse.CodeInvalidScope},
	} {
		s := sse.Subscribe(t.Context(), srv.URL+tt.path, sse.StreamOptions{})
		_, err := s.Next()
		var se *sse.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, tt.code, se.Code)
		_, err2 := s.Next()
		assert.Equal(t, err, err2, "the stop is final")
		assert.Zero(t, s.Connects())
	}
}

func TestClientStopsOnOwnSessionClosed(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("p", ""))
	require.NoError(t, b.CreateSession("c", "p"))
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	s := sse.Subscribe(t.Context(), srv.URL+"/session/p/events?scope=descendants", sse.StreamOptions{})
	defer s.Close()
	publish(t, b, "c", "x", nil)
	ev, err := s.Next()
	require.NoError(t, err)
	assert.EqualValues(t, 1, ev.ID)
	require.NoError(t, b.CloseSession("c"))
	ev, err = s.Next()
	require.NoError(t, err)
	assert.Equal(t, frame.TypeSessionClosed, ev.Type, "a child's close is handed over and the stream goes on")
	require.NoError(t, b.CloseSession("p"))
	ev, err = s.Next()
	require.NoError(t, err)
	assert.Equal(t, frame.TypeSessionClosed, ev.Type)
	assert.Equal(t, "p", ev.Session)
	_, err = s.Next()
	assert.ErrorIs(t, err, eventbus.ErrSessionClosed)
	assert.Equal(t, 1, s.Connects(), "no reconnect after the own session closed")
	waitIdle(t, h, b)
}

func TestClientContextAndClose(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)

	ctx, cancel := context.WithCancel(t.Context())
	s := sse.Subscribe(ctx, srv.URL+"/session/s1/events", sse.StreamOptions{})
	_, err := s.Next()
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = s.Next()
	assert.ErrorIs(t, err, context.Canceled)

	s = sse.Subscribe(t.Context(), srv.URL+"/session/s1/events", sse.StreamOptions{})
	_, err = s.Next()
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, func() { _ = s.Close() })
	_, err = s.Next()
	assert.ErrorIs(t, err, sse.ErrStreamClosed)
	require.NoError(t, s.Close())
	waitIdle(t, h, b)
}

// dropEvery ends every response after n frames: even connections end
// cleanly (the handler's context is cancelled), odd ones are aborted
// mid-stream (http.ErrAbortHandler), so both kinds of drop are covered.
func dropEvery(n int) func(http.Handler) http.Handler {
	var conns atomic.Int32
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			dw := &dropWriter{ResponseWriter: w, n: n, cancel: cancel, abort: conns.Add(1)%2 == 1}
			next.ServeHTTP(dw, r.WithContext(ctx))
		})
	}
}

type dropWriter struct {
	http.ResponseWriter
	n, frames int
	abort     bool
	cancel    context.CancelFunc
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if d.frames >= d.n {
		if d.abort {
			panic(http.ErrAbortHandler)
		}
		return 0, errors.New("dropped")
	}
	if bytes.HasPrefix(p, []byte("id: ")) {
		d.frames++
		if d.frames == d.n {
			d.cancel()
		}
	}
	return d.ResponseWriter.Write(p)
}

func (d *dropWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

func TestClientReconnectsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Retry: 5 * time.Millisecond})
	srv := serve(t, h, dropEvery(50))

	const total = 200
	go func() {
		for i := range total {
			if _, err := b.Publish("s1", "tick", i); err != nil {
				return
			}
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := (&sse.Client{MaxBackoff: 20 * time.Millisecond}).Subscribe(ctx, srv.URL+"/session/s1/events", sse.StreamOptions{})
	defer s.Close()
	var got []uint64
	for len(got) < total {
		ev, err := s.Next()
		require.NoError(t, err, "after %d ids", len(got))
		if ev.ID != 0 {
			got = append(got, ev.ID)
		}
	}
	assert.Equal(t, seq(1, total), got, "every id exactly once, in order")
	assert.GreaterOrEqual(t, s.Connects(), total/50)
}

// gateFirst blocks every write of the first connection after its first
// (the retry line) until gate is closed.
func gateFirst(gate chan struct{}) func(http.Handler) http.Handler {
	var conns atomic.Int32
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if conns.Add(1) == 1 {
				w = &gatedWriter{ResponseWriter: w, gate: gate}
			}
			next.ServeHTTP(w, r)
		})
	}
}

type gatedWriter struct {
	http.ResponseWriter
	gate   chan struct{}
	writes int
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	if g.writes++; g.writes > 1 {
		<-g.gate
	}
	return g.ResponseWriter.Write(p)
}

func (g *gatedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func TestClientResumesAfterEviction(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Retry: 5 * time.Millisecond})
	gate := make(chan struct{})
	srv := serve(t, h, gateFirst(gate))

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := sse.Subscribe(ctx, srv.URL+"/session/s1/events?maxQueued=16", sse.StreamOptions{LastEventID: "0"})
	defer s.Close()
	type result struct {
		ev  eventbus.Event
		err error
	}
	results := make(chan result, 1000)
	go func() {
		for {
			ev, err := s.Next()
			results <- result{ev, err}
			if err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)
	const total = 100
	for range total {
		publish(t, b, "s1", "tick", nil)
	}
	require.Eventually(t, func() bool { return b.Stats().Evicted == 1 }, 5*time.Second, time.Millisecond)
	close(gate)

	var got []uint64
	evicted := false
	for len(got) < total {
		r := <-results
		require.NoError(t, r.err)
		if r.ev.Type == frame.TypeClientEvicted {
			evicted = true
			assert.EqualValues(t, len(got)+1, jsonField(t, r.ev.Data, "droppedAfter"))
		}
		if r.ev.ID != 0 {
			got = append(got, r.ev.ID)
		}
	}
	assert.True(t, evicted, "the client saw client_evicted")
	assert.Equal(t, seq(1, total), got, "every id exactly once across the eviction")
	assert.Equal(t, 2, s.Connects())
	_ = s.Close()
	for r := range results {
		if r.err != nil {
			break
		}
	}
}

func jsonField(t *testing.T, data []byte, name string) float64 {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f, _ := m[name].(float64)
	return f
}

// The epoch sent on a resume is the one of the connection that delivered the
// cursor: a new server's epoch announced on a connection that dropped before
// any id must not be paired with the old server's cursor (the new server
// would then take the cursor as its own and skip its first events without an
// epoch_reset).
func TestClientEpochFollowsCursor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := len(seen)
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		switch i {
		case 0: // the old server delivers id 5
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(sse.HeaderEpoch, "OLD")
			_, _ = io.WriteString(w, "id: 5\nevent: t\ndata: {\"v\":1,\"id\":5,\"type\":\"t\",\"session\":\"s1\"}\n\n")
		case 1: // the restarted server answers, then the connection drops
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(sse.HeaderEpoch, "NEW")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"code":"session_closed","message":"closed"}`)
		}
	}))
	defer ts.Close()
	c := &sse.Client{Retry: time.Millisecond, MaxBackoff: time.Millisecond}
	got, err := readAll(t, c.Subscribe(t.Context(), ts.URL+"/session/s1/events", sse.StreamOptions{}))
	require.Error(t, err)
	require.Len(t, got, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	assert.Equal(t, "5", seen[2].Get("Last-Event-ID"))
	assert.Equal(t, "OLD", seen[2].Get(sse.HeaderEpoch), "the epoch of the cursor, not of the empty connection")
}
