package sse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
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
	w.Header().Set(resume.HeaderEpoch, "EP")
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

			var se *resume.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusGone, se.Status)
			assert.Equal(t, resume.CodeSessionClosed, se.Code)
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
			assert.Equal(t, "EP", srv.header(1).Get(resume.HeaderEpoch), "the epoch the server announced is sent back")
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
	assert.Equal(t, "E", srv.header(0).Get(resume.HeaderEpoch))
	assert.Equal(t, "Bearer x", srv.header(0).Get("Authorization"))
}

// TestClientRefusesMalformedStartCursor: a StreamOptions.LastEventID or
// Epoch that no HTTP client can send as a header (a CR or LF from a file
// read) stops the stream at once with an error naming the value — it used
// to make a request net/http refuses, and the stream retried that error
// forever. (A cursor that can be sent but is malformed, "-5", is the
// server's to refuse: 400 naming it.)
func TestClientRefusesMalformedStartCursor(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer ts.Close()
	for _, o := range []sse.StreamOptions{{LastEventID: "5\n"}, {LastEventID: "E-5\r\n"}, {LastEventID: "5", Epoch: "E\r"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		s := (&sse.Client{Retry: time.Millisecond, MaxBackoff: time.Millisecond}).Subscribe(ctx, ts.URL+"/session/s/events", o)
		_, err := s.Next()
		cancel()
		require.Error(t, err, "%+v", o)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%+v: stopped at once, not retried", o)
		bad := o.LastEventID
		if o.Epoch != "" {
			bad = o.Epoch
		}
		assert.Contains(t, err.Error(), strconv.Quote(bad), "%+v", o)
	}
	assert.Zero(t, calls.Load(), "nothing sent")
}

// TestClientRefusesURLWithoutHTTPScheme: a URL no HTTP client can request
// (no scheme: "localhost:8080/…", or another one) stops the stream at once
// with an error naming it, as the WebSocket client does; it was retried
// forever as a network error.
func TestClientRefusesURLWithoutHTTPScheme(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"localhost:8080/session/s/events", "ftp://127.0.0.1/session/s/events", "http:///session/s/events"} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		s := (&sse.Client{Retry: time.Millisecond, MaxBackoff: time.Millisecond}).Subscribe(ctx, u, sse.StreamOptions{})
		_, err := s.Next()
		cancel()
		require.Error(t, err, u)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: stopped at once, not retried", u)
		assert.Contains(t, err.Error(), strconv.Quote(u), u)
	}
}

// TestClientRefusesHeaderItCannotSend: a Client.Header no HTTP client can
// send (a CR or LF in a value read from a file, a space in a name) stops
// the stream at its first Next with an error naming it; it was retried
// forever as a network error.
func TestClientRefusesHeaderItCannotSend(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer ts.Close()
	for _, hd := range []http.Header{{"Authorization": {"Bearer x\n"}}, {"Bad Name": {"v"}}} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		s := (&sse.Client{Header: hd, Retry: time.Millisecond, MaxBackoff: time.Millisecond}).Subscribe(ctx, ts.URL+"/session/s/events", sse.StreamOptions{})
		_, err := s.Next()
		cancel()
		require.Error(t, err, "%v", hd)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%v: stopped at once, not retried", hd)
		for k := range hd {
			assert.Contains(t, err.Error(), k, "%v", hd)
		}
	}
	assert.Zero(t, calls.Load(), "nothing sent")
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
	var se *resume.StatusError
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
		{"/session/nope/events", resume.CodeSessionNotFound},
		{"/session/s1/events?scope=x", resume.CodeInvalidScope},
	} {
		s := sse.Subscribe(t.Context(), srv.URL+tt.path, sse.StreamOptions{})
		_, err := s.Next()
		var se *resume.StatusError
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
	assert.ErrorIs(t, err, resume.ErrStreamClosed)
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

func jsonField(t *testing.T, data []byte, name string) float64 {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f, _ := m[name].(float64)
	return f
}
