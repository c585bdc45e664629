package sse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// serveDirect calls h.ServeHTTP for session s1 with the raw query and
// headers (several values per name allowed) and returns the recorder.
func serveDirect(t *testing.T, h http.Handler, rawQuery string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
	r.URL.RawQuery = rawQuery
	r.SetPathValue("id", "s1")
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func errorBody(t *testing.T, w *httptest.ResponseRecorder) (code, message string) {
	t.Helper()
	var body struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return body.Code, body.Message
}

// Issue 12.7 (handler): queries that do not parse or repeat a parameter,
// and repeated cursor headers, no longer fall back silently to defaults;
// error messages quote non-ASCII input as itself and carry no Go package
// prefixes.
func TestHandlerRefusesAmbiguousRequests(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "t", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	for _, tt := range []struct {
		name, query string
		header      http.Header
		code, inMsg string
	}{
		{name: "bad escape", query: "scope=%zz", code: resume.CodeInvalidQuery, inMsg: "%zz"},
		{name: "semicolon", query: "a=1;scope=bogus", code: resume.CodeInvalidQuery, inMsg: "semicolon"},
		{name: "scope twice", query: "scope=all&scope=session", code: resume.CodeInvalidQuery, inMsg: "scope"},
		{name: "cursor twice in query", query: "lastEventId=1&lastEventId=2", code: resume.CodeInvalidQuery, inMsg: "lastEventId"},
		{name: "two Last-Event-ID headers", header: http.Header{"Last-Event-Id": {"1", "2"}}, code: resume.CodeInvalidLastEventID, inMsg: "Last-Event-ID"},
		{name: "two epoch headers", header: http.Header{"X-Event-Epoch": {"a", "b"}}, code: resume.CodeInvalidEpoch, inMsg: "X-Event-Epoch"},
		{name: "arabic digit", header: http.Header{"Last-Event-Id": {"٣"}}, code: resume.CodeInvalidLastEventID, inMsg: `'٣' at byte 0`},
		{name: "invalid UTF-8", header: http.Header{"Last-Event-Id": {"1\xd9"}}, code: resume.CodeInvalidLastEventID, inMsg: `'\xd9' at byte 1`},
		{name: "scope non-ASCII", query: "scope=%D9%A3", code: resume.CodeInvalidScope, inMsg: `"٣"`},
	} {
		w := serveDirect(t, h, tt.query, tt.header)
		assert.Equal(t, http.StatusBadRequest, w.Code, tt.name)
		assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"), tt.name)
		code, msg := errorBody(t, w)
		assert.Equal(t, tt.code, code, tt.name)
		assert.Contains(t, msg, tt.inMsg, tt.name)
		assert.NotContains(t, msg, "Ù", tt.name)
		for _, prefix := range []string{"sse:", "eventbus:", "url:", "json:"} {
			assert.NotContains(t, msg, prefix, tt.name)
		}
	}
	w := serveDirect(t, h, "", http.Header{"Last-Event-Id": {"x"}})
	_, msg := errorBody(t, w)
	assert.True(t, strings.HasPrefix(msg, "invalid Last-Event-ID"), msg)
	assert.Zero(t, h.Stats().Started)
	assert.Zero(t, b.Stats().Subscribers)
}

// Issue 12.6: a 503 at shutdown made browsers' EventSource stop for good
// (WHATWG: any non-200 answer fails the connection). A closed handler, or a
// handler over a closed bus, answers 200 text/event-stream with a retry:
// line (spread over [retry, 2×retry]) and ends the response, so that
// EventSource reconnects, to this server once it is back or to another.
func TestHandlerShutdownLetsBrowsersReconnect(t *testing.T) {
	t.Parallel()
	for _, closeWhat := range []string{"bus", "handler"} {
		t.Run(closeWhat, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			publish(t, b, "s1", "hello", nil)
			h := newHandler(t, b, sse.HandlerOptions{Retry: time.Second})
			if closeWhat == "bus" {
				require.NoError(t, b.Close())
			} else {
				require.NoError(t, h.Close())
			}
			seen := map[string]bool{}
			for range 20 {
				w := serveDirect(t, h, "", nil)
				require.Equal(t, http.StatusOK, w.Code)
				assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
				ra := w.Header().Get("Retry-After")
				assert.Contains(t, []string{"1", "2"}, ra)
				d := sse.NewDecoder(strings.NewReader(w.Body.String()))
				_, err := d.Next()
				assert.ErrorIs(t, err, io.EOF, "no frame, just the retry line")
				r, ok := d.Retry()
				require.True(t, ok, "a retry: line")
				assert.GreaterOrEqual(t, r, time.Second)
				assert.LessOrEqual(t, r, 2*time.Second)
				seen[r.String()] = true
			}
			assert.Greater(t, len(seen), 1, "the retry delay is spread")
			assert.Zero(t, h.Stats().Started)
		})
	}
}

// switchable serves through whichever handler is current: a server that
// restarts in memory.
type switchable struct{ h atomic.Pointer[http.Handler] }

func (s *switchable) set(h http.Handler)                               { s.h.Store(&h) }
func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

// Issue 12.6: a transient 429 (the subscriber cap, met while 64 streams
// reset at once reconnect) ended the Go client for good. It is retried
// after Retry-After.
func TestClientRetriesTooManyRequests(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"code":"subscriber_limit_exceeded","message":"full"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 7\ndata: {\"v\":1,\"id\":7,\"type\":\"t\",\"session\":\"s\"}\n\n")
	}))
	defer ts.Close()
	s := (&sse.Client{Retry: time.Millisecond}).Subscribe(t.Context(), ts.URL, sse.StreamOptions{})
	defer s.Close()
	start := time.Now()
	ev, err := s.Next()
	require.NoError(t, err, "429 is transient")
	assert.EqualValues(t, 7, ev.ID)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After honoured")
	assert.EqualValues(t, 2, calls.Load())
}

// serveUntilID serves r on h until the body holds a complete frame with an
// id of at least last, or the handler returns by itself (an error answer),
// then ends the request and returns what was written. The request ends on
// that condition, not on a short timer that a loaded machine under -race
// can miss; the 30 s deadline is only a hang guard (a handler that never
// writes id last fails the caller's assertions after it).
func serveUntilID(t *testing.T, h http.Handler, r *http.Request, last uint64) *recorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := newRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r.WithContext(ctx))
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return w
		case <-ctx.Done():
			<-done
			return w
		case <-tick.C:
		}
		body := w.body()
		if i := strings.LastIndex(body, "\n\n"); i >= 0 {
			body = body[:i+2] // complete frames only
		} else {
			body = ""
		}
		if got := ids(frames(t, body)); len(got) > 0 && got[len(got)-1] >= last {
			cancel()
			<-done
			return w
		}
	}
}
