package e2e

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
)

// The harness of the browser-module tests (browser_test.go,
// browser_faults_test.go): a server with a real bus and the SSE handler
// behind a fault injector, replaybus.js, and a test page
// (testdata/browser_page.html) open in several Chromium tabs of one
// origin. The server keeps every id it published, per bus incarnation, so
// each tab's record can be checked against it.

//go:embed testdata/browser_page.html
var browserPage []byte

// browserSession is the session the page streams.
const browserSession = "s"

// busLife is one life (incarnation) of the server: a bus (its epoch), its SSE handler
// and what was published on it.
type busLife struct {
	bus   *eventbus.Bus
	sse   *sse.Handler
	turns *turns.Handler

	mu    sync.Mutex
	ids   []uint64       // published, in order
	chunk map[uint64]int // id → chunk number, for the chunks ("k;" text)
	byK   map[int]uint64 // chunk number → id
}

// plannedAnswer is how the server answers the next stream request: an
// error status (with Retry-After seconds when retryAfter ≥ 0), or a stream
// cut after cutAfter bytes (0: not cut).
type plannedAnswer struct {
	status     int
	retryAfter int
	cutAfter   int
}

// streamRequest is a stream request as the server saw it.
type streamRequest struct {
	tab         string // the page that made it (X-Tab)
	at          time.Time
	lastEventID string
	auth        string
	status      int
	retryAfter  int
}

type browserServer struct {
	t        *testing.T
	ts       *httptest.Server
	busOpts  eventbus.Options
	sseOpts  sse.HandlerOptions
	streamQS string // the stream URL's query (coalesce=acp…)

	mu      sync.Mutex
	cur     *busLife
	all     []*busLife
	token   string // the valid bearer token; "" asks for none
	planned []plannedAnswer
	reqs    []streamRequest
	cancels []streamRequest // POST /session/{id}/cancel, as the server saw them
	open    map[*faultWriter]struct{}
	k       int // chunks published
}

func newBrowserServer(t *testing.T, busOpts eventbus.Options, sseOpts sse.HandlerOptions, streamQS string) *browserServer {
	t.Helper()
	s := &browserServer{t: t, busOpts: busOpts, sseOpts: sseOpts, streamQS: streamQS, open: map[*faultWriter]struct{}{}}
	s.cur = s.incarnate()
	require.NoError(t, s.cur.bus.CreateSession(browserSession, ""))
	s.all = []*busLife{s.cur}
	mux := http.NewServeMux()
	mux.Handle(browser.Pattern, browser.Handler{})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(browserPage)
	})
	mux.HandleFunc("GET /token", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(s.token))
	})
	mux.HandleFunc(sse.Pattern, s.events)
	mux.HandleFunc(turns.CancelPattern, s.cancel)
	s.ts = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.mu.Lock()
		all := s.all
		s.mu.Unlock()
		for _, inc := range all {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = inc.sse.Shutdown(ctx)
			cancel()
		}
		s.ts.Close()
		for _, inc := range all {
			_ = inc.bus.Close()
		}
	})
	return s
}

func (s *browserServer) incarnate() *busLife {
	bus, err := eventbus.New(s.busOpts)
	require.NoError(s.t, err)
	h, err := sse.NewHandler(bus, s.sseOpts)
	require.NoError(s.t, err)
	th, err := turns.NewHandler(bus, turns.HandlerOptions{})
	require.NoError(s.t, err)
	return &busLife{bus: bus, sse: h, turns: th, chunk: map[uint64]int{}, byK: map[int]uint64{}}
}

// pageURL is the test page streaming the session with the module options o.
func (s *browserServer) pageURL(o map[string]any) string {
	stream := "/session/" + browserSession + "/events"
	if s.streamQS != "" {
		stream += "?" + s.streamQS
	}
	b, err := json.Marshal(o)
	require.NoError(s.t, err)
	return s.ts.URL + "/page?url=" + url.QueryEscape(stream) + "&o=" + url.QueryEscape(string(b))
}

func (s *browserServer) events(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cur := s.cur
	req := streamRequest{tab: r.Header.Get("X-Tab"), at: time.Now(), lastEventID: r.Header.Get("Last-Event-ID"), auth: r.Header.Get("Authorization"), status: 200, retryAfter: -1}
	var a plannedAnswer
	if s.token != "" && req.auth != "Bearer "+s.token {
		a.status = http.StatusUnauthorized
		a.retryAfter = -1
	} else if len(s.planned) > 0 {
		a, s.planned = s.planned[0], s.planned[1:]
	}
	if a.status != 0 {
		req.status, req.retryAfter = a.status, a.retryAfter
	}
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if a.status != 0 {
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-Event-Epoch", cur.bus.Epoch())
		if a.retryAfter >= 0 {
			h.Set("Retry-After", strconv.Itoa(a.retryAfter))
		}
		w.WriteHeader(a.status)
		_, _ = fmt.Fprintf(w, `{"code":"fault","message":"planned %d"}`, a.status)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cw := &faultWriter{ResponseWriter: w, left: a.cutAfter, cancel: cancel}
	s.mu.Lock()
	s.open[cw] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.open, cw)
		s.mu.Unlock()
	}()
	cur.sse.ServeHTTP(cw, r.WithContext(ctx))
}

// cancel serves POST /session/{id}/cancel on the current incarnation,
// with the stream's token rule: a stale token is a 401.
func (s *browserServer) cancel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cur := s.cur
	req := streamRequest{tab: r.Header.Get("X-Tab"), at: time.Now(), auth: r.Header.Get("Authorization"), status: 200}
	if s.token != "" && req.auth != "Bearer "+s.token {
		req.status = http.StatusUnauthorized
	}
	s.cancels = append(s.cancels, req)
	s.mu.Unlock()
	if req.status == http.StatusUnauthorized {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"unauthorized","message":"stale token"}`))
		return
	}
	cur.turns.Cancel().ServeHTTP(w, r)
}

// record adds ids written on inc outside publish (turn records) to what
// it published, in order.
func (inc *busLife) record(ids ...uint64) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	for _, id := range ids {
		if i, found := slices.BinarySearch(inc.ids, id); !found {
			inc.ids = slices.Insert(inc.ids, i, id)
		}
	}
}

// plan queues answers for the next stream requests.
func (s *browserServer) plan(a ...plannedAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planned = append(s.planned, a...)
}

// cutStreams drops every open stream now, as a network that goes away
// does: the socket is closed under the response.
func (s *browserServer) cutStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cw := range s.open {
		cw.cutNow()
	}
}

// rotateToken makes the current token invalid: the next connect gets a 401
// and must fetch the new one from /token.
func (s *browserServer) rotateToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = fmt.Sprintf("tok-%d", time.Now().UnixNano())
}

// restart replaces the bus and its handler by a new incarnation (a new
// epoch, ids from 1 again), as a restarted in-memory server; its session
// is created after sessionAfter (until then the stream answers 404).
func (s *browserServer) restart(sessionAfter time.Duration) { s.restartWith(sessionAfter, 0) }

// restartWith is restart with prefill events published on the new
// incarnation before any client can reach it (sessionAfter must be 0).
func (s *browserServer) restartWith(sessionAfter time.Duration, prefill int) {
	inc := s.incarnate()
	if prefill > 0 {
		require.NoError(s.t, inc.bus.CreateSession(browserSession, ""))
		s.publishOn(inc, prefill)
	}
	s.mu.Lock()
	old := s.cur
	s.cur = inc
	s.all = append(s.all, inc)
	s.mu.Unlock()
	_ = old.sse.Close()
	_ = old.bus.Close()
	create := func() {
		if prefill == 0 {
			_ = inc.bus.CreateSession(browserSession, "")
		}
	}
	if sessionAfter <= 0 {
		create()
	} else {
		time.AfterFunc(sessionAfter, create)
	}
}

// publish publishes n events on the current incarnation: text chunks
// ("k;", mergeable) with a note (not mergeable) every seventh. It returns
// how many were published (none while the session does not exist).
func (s *browserServer) publish(n int) int {
	s.mu.Lock()
	inc := s.cur
	s.mu.Unlock()
	return s.publishOn(inc, n)
}

// publishOn is publish on the incarnation inc.
func (s *browserServer) publishOn(inc *busLife, n int) int {
	done := 0
	for range n {
		s.mu.Lock()
		s.k++
		k := s.k
		s.mu.Unlock()
		var ev eventbus.Event
		var err error
		inc.mu.Lock()
		if k%7 == 0 {
			ev, err = inc.bus.Publish(browserSession, "note", map[string]int{"k": k})
		} else {
			ev, err = inc.bus.Publish(browserSession, "agent_message_chunk", map[string]any{
				"sessionId": browserSession,
				"update":    map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": strconv.Itoa(k) + ";"}},
			})
		}
		if id := ev.ID; err == nil {
			inc.ids = append(inc.ids, id)
			if k%7 != 0 {
				inc.chunk[id], inc.byK[k] = k, id
			}
			done++
		}
		inc.mu.Unlock()
	}
	return done
}

// last returns the epoch and the last id published on the current
// incarnation.
func (s *browserServer) last() (string, uint64) {
	s.mu.Lock()
	inc := s.cur
	s.mu.Unlock()
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if len(inc.ids) == 0 {
		return inc.bus.Epoch(), 0
	}
	return inc.bus.Epoch(), inc.ids[len(inc.ids)-1]
}

func (s *browserServer) requests() []streamRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// active is how many streams the SSE handlers hold open now.
func (s *browserServer) active() int {
	s.mu.Lock()
	all := s.all
	s.mu.Unlock()
	n := 0
	for _, inc := range all {
		n += inc.sse.Stats().Active
	}
	return n
}

// faultWriter passes a stream through until it is cut: after left bytes
// (left > 0), or by cutNow. A cut writes what came before it, in the middle
// of a frame when the budget ends there, closes the socket under the
// response and ends the handler's request.
type faultWriter struct {
	http.ResponseWriter
	mu      sync.Mutex
	left    int
	cut     bool
	started bool // the answer's header is written
	cancel  func()
}

// WriteHeader passes the header on until the cut.
func (c *faultWriter) WriteHeader(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cut {
		c.started = true
		c.ResponseWriter.WriteHeader(code)
	}
}

// FlushError flushes until the cut; after it the socket is gone and
// nothing reaches the hijacked response.
func (c *faultWriter) FlushError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil
	}
	return http.NewResponseController(c.ResponseWriter).Flush()
}

// SetWriteDeadline sets the deadline until the cut.
func (c *faultWriter) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil
	}
	return http.NewResponseController(c.ResponseWriter).SetWriteDeadline(t)
}

func (c *faultWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return len(p), nil
	}
	c.started = true
	if c.left > 0 && len(p) >= c.left {
		_, _ = c.ResponseWriter.Write(p[:c.left])
		c.cutLocked()
		return len(p), nil
	}
	if c.left > 0 {
		c.left -= len(p)
	}
	return c.ResponseWriter.Write(p)
}

func (c *faultWriter) cutNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cut {
		c.cutLocked()
	}
}

// cutLocked closes the socket: after what was written, or before any
// answer (a cut while the handler had not answered yet: net/http must not
// send its own empty 200 for the handler that returns, which no network
// cut produces).
func (c *faultWriter) cutLocked() {
	c.cut = true
	rc := http.NewResponseController(c.ResponseWriter)
	if c.started {
		_ = rc.Flush()
	}
	if conn, _, err := rc.Hijack(); err == nil {
		_ = conn.Close()
	}
	c.cancel()
}
