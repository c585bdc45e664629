package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
)

// rawRequest sends req on a new TCP connection to addr, then feeds drip
// (one byte every step) until the server answers, and returns the status
// line and how long the server took to answer and close the connection.
func rawRequest(t *testing.T, addr, req, drip string, step time.Duration) (status string, took time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(drip); i++ {
			select {
			case <-done:
				return
			case <-time.After(step):
			}
			if _, err := c.Write([]byte{drip[i]}); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(done)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	status, err = br.ReadString('\n')
	require.NoError(t, err, "no answer: the body read pins the connection")
	_, err = io.Copy(io.Discard, br)
	if !errors.Is(err, syscall.ECONNRESET) { // closed while we were still writing: a reset
		require.NoError(t, err, "the connection was not closed")
	}
	return strings.TrimSpace(status), time.Since(start)
}

// Issue 12.5: a POST whose body never finishes — Content-Length: 100 and 10
// bytes, one byte per interval, an absurd Content-Length, a chunked body that
// stalls — never got an answer or a close (200 such connections were held
// for over 135 s). The body read is bounded per route (Options.BodyTimeout):
// 408 and a close, or 413 at once; an SSE stream on the same server lives
// on well past that bound.
func TestSlowBodiesDoNotPinConnections(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 300 * time.Millisecond
	s := newServer(t, Options{BodyTimeout: bodyTimeout, SSE: sse.HandlerOptions{Heartbeat: -1}})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewUnstartedServer(s)
	ts.Config.ReadHeaderTimeout = time.Second
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = s.Close() })
	addr := ts.Listener.Addr().String()

	// A long-lived stream opened first must outlive every body deadline.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/session/s1/events?replay=0", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	head := "POST /session/s1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	// net/http waits up to 500 ms (its RST-avoidance delay) before it
	// closes a connection whose body it did not read to the end.
	const closeSlack = 500*time.Millisecond + 700*time.Millisecond
	for _, tc := range []struct {
		name, req, drip string
		step            time.Duration
		status          string
		within          time.Duration
	}{
		{"10 of 100 bytes", head + "Content-Length: 100\r\n\r\n" + `{"type":"a`, "", 0, "408", bodyTimeout + closeSlack},
		{"1 byte per interval", head + "Content-Length: 100\r\n\r\n", `{"type":"a","data":"` + strings.Repeat("x", 80) + `"}`, 50 * time.Millisecond, "408", bodyTimeout + closeSlack},
		{"absurd Content-Length", head + "Content-Length: 1000000000000\r\n\r\n" + `{"type":"a"`, "", 0, "413", closeSlack},
		{"stalled chunked body", head + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"typ\r\n", "", 0, "408", bodyTimeout + closeSlack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Many at once, as an attacker would.
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, took := rawRequest(t, addr, tc.req, tc.drip, tc.step)
					assert.Contains(t, status, " "+tc.status+" ")
					assert.Less(t, took, tc.within, "answered and closed within the body deadline")
				}()
			}
			wg.Wait()
		})
	}
	assert.Zero(t, s.Bus().LastEventID(), "no half-read body was published")

	ev, err := s.Bus().Publish("s1", "still-live", nil)
	require.NoError(t, err)
	dec := sse.NewDecoder(resp.Body)
	f, err := dec.Next()
	require.NoError(t, err, "the SSE stream was cut")
	require.Equal(t, resume.TypeStreamStart, f.Event, "a live-only stream opens with where it starts")
	f, err = dec.Next()
	require.NoError(t, err, "the SSE stream was cut")
	got, err := sse.DecodeEvent(f)
	require.NoError(t, err)
	assert.Equal(t, ev.ID, got.ID)
}

// Issue 12.7 (example server): one id validation on every path, JSON only,
// no silent fallbacks, and error answers that quote bad input correctly,
// carry no Go package prefixes, use one content type and say where invalid
// JSON broke.
func TestAdmission(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	send := func(method, target, contentType, body string) (int, http.Header, map[string]any) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, target, r)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var out map[string]any
		if rec.Body.Len() > 0 && rec.Header().Get("Content-Type") == "application/json; charset=utf-8" {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "body %q", rec.Body.String())
		}
		return rec.Code, rec.Header(), out
	}
	const js = "application/json"
	for _, tc := range []struct {
		name, method, target, ct, body string
		status                         int
		code, inMsg                    string
	}{
		{"publish to an id with a slash", "POST", "/session/a%2Fc/events", js, `{"type":"x"}`, 400, "invalid_session_id", `"a/c"`},
		{"publish to ..", "POST", "/session/%2E%2E/events", js, `{"type":"x"}`, 400, "invalid_session_id", `".."`},
		{"create ..", "POST", "/sessions", js, `{"id":".."}`, 400, "invalid_session_id", `".."`},
		{"create under a bad parent", "POST", "/sessions", js, `{"id":"k","parent":"a/b"}`, 400, "invalid_session_id", "parent"},
		{"stream an id with a slash", "GET", "/session/a%2Fc/events", "", "", 400, "invalid_session_id", `"a/c"`},
		{"delete an id with a slash", "DELETE", "/session/a%2Fc", "", "", 400, "invalid_session_id", `"a/c"`},
		{"text/plain", "POST", "/session/s1/events", "text/plain", `{"type":"x"}`, 415, "unsupported_media_type", `"text/plain"`},
		{"form", "POST", "/session/s1/events", "application/x-www-form-urlencoded", `{"type":"x"}`, 415, "unsupported_media_type", "application/json"},
		{"no content type", "POST", "/sessions", "", `{"id":"nct"}`, 415, "unsupported_media_type", "application/json"},
		{"null body", "POST", "/sessions", js, `null`, 400, "invalid_json", "null"},
		{"invalid UTF-8 in an id", "POST", "/sessions", js, "{\"id\":\"a\xffb\"}", 400, "invalid_json", "UTF-8 at byte 8"},
		{"newline in origin", "POST", "/session/s1/events", js, `{"type":"x","origin":"a\nb"}`, 400, "invalid_argument", "origin"},
		{"10 KiB origin", "POST", "/session/s1/events", js, `{"type":"x","origin":"` + strings.Repeat("o", 10<<10) + `"}`, 400, "invalid_argument", "origin"},
		{"double slash", "GET", "/session//events", "", "", 404, "not_found", "/session//events"},
		{"dot segment", "POST", "/session/./events", js, `{"type":"x"}`, 404, "not_found", ""},
		{"non-ASCII quoted as itself", "POST", "/sessions", js, `{"id":"٣/x"}`, 400, "invalid_session_id", `"٣/x"`},
		{"where JSON broke", "POST", "/session/s1/events", js, `{"type":}`, 400, "invalid_json", "at byte 8"},
		{"wrong JSON type", "POST", "/session/s1/events", js, `{"type":7}`, 400, "invalid_json", `"type" must be a string`},
		{"cascade does not parse", "DELETE", "/session/s1?cascade=%zz", "", "", 400, "invalid_query", "%zz"},
		{"unknown session", "DELETE", "/session/nope", "", "", 404, "session_not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := send(tc.method, tc.target, tc.ct, tc.body)
			require.Equal(t, tc.status, status, "%v", body)
			assert.Equal(t, "application/json; charset=utf-8", hdr.Get("Content-Type"))
			assert.Equal(t, tc.code, body["code"])
			msg, _ := body["message"].(string)
			assert.Contains(t, msg, tc.inMsg)
			assert.NotContains(t, msg, "Ù")
			for _, prefix := range []string{"eventbus:", "json:", "sse:", "http:"} {
				assert.NotContains(t, msg, prefix)
			}
		})
	}
	assert.Zero(t, s.Bus().LastEventID(), "nothing was published")
	for _, id := range []string{"a/c", "..", "nct"} {
		assert.False(t, s.Bus().SessionExists(id), "session %q created", id)
	}
}

// Issue 12.2: POST /session/{id}/events answered {"id": N} while the stream
// writes <epoch>-N, so a publisher resuming from its own event used a plain
// cursor that cannot detect a restart. The answer carries the epoch and the
// id exactly as the stream writes it.
func TestPublishAnswersEpochAndCursor(t *testing.T) {
	t.Parallel()
	for _, epochIDs := range []bool{true, false} {
		s := newServer(t, Options{SSE: sse.HandlerOptions{PlainIDs: !epochIDs}})
		require.NoError(t, s.Bus().CreateSession("s1", ""))
		status, _, out := do(t, s, http.MethodPost, "/session/s1/events", `{"type":"note"}`)
		require.Equal(t, http.StatusAccepted, status)
		assert.EqualValues(t, 1, out["id"])
		assert.Equal(t, s.Bus().Epoch(), out["epoch"])
		want := "1"
		if epochIDs {
			want = s.Bus().Epoch() + "-1"
		}
		assert.Equal(t, want, out["cursor"])

		// The stream writes the same id. The request ends once the stream
		// has written that id line (not on a short timer, which a loaded
		// machine under -race can miss); 30 s is only a hang guard.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/session/s1/events", nil)
		rec := &cancelRecorder{rec: httptest.NewRecorder(), want: "id: " + want + "\n", cancel: cancel}
		s.ServeHTTP(rec, req)
		cancel()
		assert.Contains(t, rec.body(), "id: "+want+"\n")
	}
}

// Issue 12.9: the example server wrote one INFO line per session create and
// close (80,001 lines for 20,000 sessions). They are Debug now: at INFO, a
// churn of sessions writes nothing.
func TestSessionChurnLogsNothingAtInfo(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := newServer(t, Options{Logger: log})
	for i := range 200 {
		id := fmt.Sprintf("c%d", i)
		status, _, _ := do(t, s, http.MethodPost, "/sessions", `{"id":"`+id+`"}`)
		require.Equal(t, http.StatusCreated, status)
		status, _, _ = do(t, s, http.MethodDelete, "/session/"+id, "")
		require.Equal(t, http.StatusNoContent, status)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, buf.String())
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// cancelRecorder records a response and calls cancel (ending the request)
// as soon as the body contains want. Writes and reads are serialised: a
// stream may write from a goroutine of its own.
type cancelRecorder struct {
	mu     sync.Mutex
	rec    *httptest.ResponseRecorder
	want   string
	cancel context.CancelFunc
}

func (r *cancelRecorder) Header() http.Header { return r.rec.Header() }

func (r *cancelRecorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.WriteHeader(code)
}

func (r *cancelRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.rec.Write(p)
	if strings.Contains(r.rec.Body.String(), r.want) {
		r.cancel()
	}
	return n, err
}

func (r *cancelRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Flush()
}

func (r *cancelRecorder) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.Body.String()
}

// headersOnly sends req (request line and headers, announcing a body) on a
// new TCP connection and never sends the body. It returns the status line,
// how long the answer took and how long until the server closed the
// connection (bounded at 30 s).
func headersOnly(t *testing.T, addr, req string) (status string, answered, closed time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	br := bufio.NewReader(c)
	status, err = br.ReadString('\n')
	require.NoError(t, err, "no answer while the body is missing")
	answered = time.Since(start)
	_, err = io.Copy(io.Discard, br)
	if !errors.Is(err, syscall.ECONNRESET) {
		require.NoError(t, err, "the connection was not closed")
	}
	return strings.TrimSpace(status), answered, time.Since(start)
}

// Issue 18.5: a POST whose body never arrives, refused or not. The body
// deadline covered only the JSON path (and there, with BodyTimeout equal to
// WriteTimeout as in production, the 408 was cut by the write deadline: the
// connection closed without an answer); a refusal written before the body
// was read (415 without Content-Type, a bad id, a query parameter, an
// unknown route) waited for net/http to discard a body that never came, and
// held the connection as long as the client liked. Now every one answers its
// status within the body timeout (the refusals at once) and closes.
func TestBodiesThatNeverArriveAreAnsweredAndClosed(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 2 * time.Second
	s := newServer(t, Options{BodyTimeout: bodyTimeout, WriteTimeout: bodyTimeout})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()

	const js = "Content-Type: application/json\r\n"
	const cl = "Content-Length: 100\r\n"
	const chunked = "Transfer-Encoding: chunked\r\n"
	// net/http waits up to 500 ms (its RST-avoidance delay) before it
	// closes a connection whose body it did not read to the end.
	const closeSlack = 500*time.Millisecond + time.Second
	for _, tc := range []struct {
		name, target, headers string
		status                string
		refused               bool // answered before the body deadline
	}{
		{"publish, JSON: 408", "/session/s1/events", js + cl, "408", false},
		{"publish, chunked JSON: 408", "/session/s1/events", js + chunked, "408", false},
		{"create, JSON: 408", "/sessions", js + cl, "408", false},
		{"publish, no Content-Type: 415", "/session/s1/events", cl, "415", true},
		{"create, no Content-Type: 415", "/sessions", cl, "415", true},
		{"publish, chunked without Content-Type: 415", "/session/s1/events", chunked, "415", true},
		{"publish, text/plain: 415", "/session/s1/events", "Content-Type: text/plain\r\n" + cl, "415", true},
		{"publish, gzip: 415", "/session/s1/events", js + "Content-Encoding: gzip\r\n" + cl, "415", true},
		{"publish, query parameter: 400", "/session/s1/events?x=1", js + cl, "400", true},
		{"publish, bad id: 400", "/session/a%2Fb/events", js + cl, "400", true},
		{"unknown route: 404", "/nope", js + cl, "404", true},
		{"wrong method: 405", "/healthz", js + cl, "405", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, answered, closed := headersOnly(t, addr,
				"POST "+tc.target+" HTTP/1.1\r\nHost: localhost\r\n"+tc.headers+"\r\n")
			assert.Contains(t, status, " "+tc.status+" ")
			if tc.refused {
				assert.Less(t, answered, bodyTimeout, "a refusal does not wait for the body")
			} else {
				assert.GreaterOrEqual(t, answered, bodyTimeout, "the 408 comes when the body deadline passed")
			}
			assert.Less(t, answered, bodyTimeout+closeSlack, "answered within the body timeout")
			assert.Less(t, closed, bodyTimeout+closeSlack, "closed within the body timeout")
		})
	}
}

// Issue 18.6 (the server's half): while Options.Ready reports the backend
// down, /healthz is 503 and every route that uses the bus answers 503
// unavailable with Retry-After before touching it — a publish would wait
// for the backend and fail as a 500, a stream would open empty — while the
// routes that only read local state still answer. Ready back: all is 200.
func TestReadyGatesTheBusRoutes(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	s := newServer(t, Options{Ready: func() error {
		if down.Load() {
			return errors.New("nats: the NATS connection is reconnecting")
		}
		return nil
	}})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = s.Close() })
	send := func(method, path, body string, hdr ...string) (int, http.Header, map[string]string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, ts.URL+path, r)
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel() // a stream that opens is left at once
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]string
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			_ = json.NewDecoder(resp.Body).Decode(&out)
		}
		return resp.StatusCode, resp.Header, out
	}
	wsHeaders := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	routes := []struct {
		name, method, path, body string
		hdr                      []string
		up                       int
	}{
		{"publish", "POST", "/session/s1/events", `{"type":"note"}`, nil, http.StatusAccepted},
		{"create", "POST", "/sessions", `{"id":"s2"}`, nil, http.StatusCreated},
		{"SSE", "GET", "/session/s1/events", "", nil, http.StatusOK},
		{"WebSocket", "GET", "/session/s1/ws", "", wsHeaders, http.StatusSwitchingProtocols},
		{"close", "DELETE", "/session/s2", "", nil, http.StatusNoContent},
	}

	down.Store(true)
	status, hdr, body := send("GET", "/healthz", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "unavailable", body["status"])
	assert.Equal(t, "the NATS connection is reconnecting", body["message"])
	assert.Equal(t, "1", hdr.Get("Retry-After"))
	for _, r := range routes {
		status, hdr, body := send(r.method, r.path, r.body, r.hdr...)
		assert.Equal(t, http.StatusServiceUnavailable, status, r.name)
		assert.Equal(t, "unavailable", body["code"], r.name)
		assert.Contains(t, body["message"], "reconnecting", r.name)
		assert.Equal(t, "1", hdr.Get("Retry-After"), r.name)
	}
	assert.Zero(t, s.Bus().LastEventID(), "nothing reached the bus")
	for _, path := range []string{"/sessions", "/info", "/"} {
		status, _, _ := send("GET", path, "")
		assert.Equal(t, http.StatusOK, status, path)
	}

	down.Store(false)
	status, _, body = send("GET", "/healthz", "")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body["status"])
	for _, r := range routes {
		status, _, _ := send(r.method, r.path, r.body, r.hdr...)
		assert.Equal(t, r.up, status, r.name)
	}
}
