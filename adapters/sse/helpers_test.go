package sse_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

func newBus(t testing.TB, cfg eventbus.Options) *eventbus.Bus {
	t.Helper()
	b, err := eventbus.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func newHandler(t testing.TB, b *eventbus.Bus, o sse.HandlerOptions) *sse.Handler {
	t.Helper()
	h, err := sse.NewHandler(b, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// serve mounts h on a ServeMux at sse.Pattern behind an httptest.Server
// (wrapped by mw when given). Cleanup closes the handler before the server,
// so that server.Close does not wait for open streams.
func serve(t testing.TB, h *sse.Handler, mw func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	var hh http.Handler = h
	if mw != nil {
		hh = mw(h)
	}
	mux.Handle(sse.Pattern, hh)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	return srv
}

func publish(t testing.TB, b *eventbus.Bus, session, typ string, data any) eventbus.Event {
	t.Helper()
	ev, err := b.Publish(session, typ, data)
	require.NoError(t, err)
	return ev
}

// waitIdle waits until the handler has no stream and the bus no subscriber.
func waitIdle(t testing.TB, h *sse.Handler, b *eventbus.Bus) {
	t.Helper()
	require.Eventually(t, func() bool {
		return h.Stats().Active == 0 && b.Stats().Subscribers == 0
	}, 5*time.Second, time.Millisecond, "streams %d, subscribers %d", h.Stats().Active, b.Stats().Subscribers)
}

// rawStream is an open SSE response read frame by frame.
type rawStream struct {
	resp   *http.Response
	dec    *sse.Decoder
	cancel context.CancelFunc
}

func openRaw(t testing.TB, url string, header http.Header) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	s := &rawStream{resp: resp, dec: sse.NewDecoder(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *rawStream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

func (s *rawStream) next(t testing.TB) eventbus.Event {
	t.Helper()
	f, err := s.dec.Next()
	require.NoError(t, err)
	ev, err := sse.DecodeEvent(f)
	require.NoError(t, err)
	return ev
}

// recorder is a ResponseWriter for calling ServeHTTP directly: safe to read
// while the handler writes, and optionally gated so that writes after the
// first block until the gate opens (a client that stopped reading).
type recorder struct {
	mu     sync.Mutex
	header http.Header
	status int
	buf    strings.Builder
	writes int
	gate   chan struct{} // nil: never block
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.writes++
	block := r.gate != nil && r.writes > 1
	r.mu.Unlock()
	if block {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.WriteString(string(p))
}

func (r *recorder) Flush() {}

func (r *recorder) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func (r *recorder) code() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// frames parses everything r holds so far.
func frames(t testing.TB, wire string) []eventbus.Event {
	t.Helper()
	var out []eventbus.Event
	d := sse.NewDecoder(bufio.NewReader(strings.NewReader(wire)))
	for {
		f, err := d.Next()
		if err != nil {
			return out
		}
		ev, err := sse.DecodeEvent(f)
		assert.NoError(t, err)
		out = append(out, ev)
	}
}

func ids(evs []eventbus.Event) []uint64 {
	var out []uint64
	for _, ev := range evs {
		if ev.ID != 0 {
			out = append(out, ev.ID)
		}
	}
	return out
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// cutParam returns the name of the last parameter of a raw query.
func cutParam(q string) (name, value string, ok bool) {
	for i := len(q) - 1; i >= 0; i-- {
		if q[i] == '&' {
			q = q[i+1:]
			break
		}
	}
	for i := 0; i < len(q); i++ {
		if q[i] == '=' {
			return q[:i], q[i+1:], true
		}
	}
	return q, "", false
}
