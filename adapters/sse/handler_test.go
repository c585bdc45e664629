package sse_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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
	"github.com/replaybus/replaybus/scope"
)

func TestHandlerRejectsBeforeStreaming(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxSubscribers: 1})
	publish(t, b, "s1", "hello", nil)
	publish(t, b, "gone", "hello", nil)
	require.NoError(t, b.CloseSession("gone"))
	full, err := b.Subscribe(t.Context(), "full", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer full.Close()
	h := newHandler(t, b, sse.HandlerOptions{
		Authorize: func(r *http.Request, id string, _ scope.Kind) error {
			switch id {
			case "secret":
				return errors.New("not yours")
			case "login":
				return fmt.Errorf("wrapped: %w", &resume.StatusError{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "log in"})
			}
			return nil
		},
	})
	baseline := b.Stats().Subscribers

	type tc struct {
		name    string
		method  string
		session string
		query   string
		header  map[string]string
		status  int
		code    string
		inMsg   string // the message must name this
	}
	var tests []tc
	for _, v := range []string{"abc", "-1", "1.5", "0x3", " 7", "+7", "7 ", "9007199254740992", "18446744073709551616", "1\x00", "1\r\n", "\n", "e\x01f-1"} {
		tests = append(tests,
			tc{name: "header " + v, header: map[string]string{"Last-Event-ID": v}, status: 400, code: resume.CodeInvalidLastEventID},
			tc{name: "last_event_id " + v, query: "last_event_id=" + url.QueryEscape(v), status: 400, code: resume.CodeInvalidLastEventID},
			tc{name: "lastEventId " + v, query: "lastEventId=" + url.QueryEscape(v), status: 400, code: resume.CodeInvalidLastEventID},
		)
	}
	tests = append(tests,
		tc{name: "good header, bad query", query: "lastEventId=abc", header: map[string]string{"Last-Event-ID": "3"}, status: 400, code: resume.CodeInvalidLastEventID, inMsg: `"abc"`},
		tc{name: "maxQueued 15", query: "maxQueued=15", status: 400, code: resume.CodeInvalidMaxQueued, inMsg: `"15"`},
		tc{name: "maxQueued 2049", query: "maxQueued=2049", status: 400, code: resume.CodeInvalidMaxQueued, inMsg: `"2049"`},
		tc{name: "maxQueued abc", query: "maxQueued=abc", status: 400, code: resume.CodeInvalidMaxQueued, inMsg: `"abc"`},
		tc{name: "maxQueued +16", query: "maxQueued=%2B16", status: 400, code: resume.CodeInvalidMaxQueued, inMsg: `"+16"`},
		tc{name: "maxQueued 16.0", query: "maxQueued=16.0", status: 400, code: resume.CodeInvalidMaxQueued, inMsg: `"16.0"`},
		tc{name: "maxQueued huge", query: "maxQueued=99999999999999999999999", status: 400, code: resume.CodeInvalidMaxQueued},
		tc{name: "scope bogus", query: "scope=bogus", status: 400, code: resume.CodeInvalidScope, inMsg: `"bogus"`},
		tc{name: "scope case", query: "scope=Session", status: 400, code: resume.CodeInvalidScope, inMsg: `"Session"`},
		tc{name: "replay 2", query: "replay=2", status: 400, code: resume.CodeInvalidReplay, inMsg: `"2"`},
		tc{name: "replay true", query: "replay=true", status: 400, code: resume.CodeInvalidReplay, inMsg: `"true"`},
		tc{name: "events bogus", query: "events=all", status: 400, code: resume.CodeInvalidEvents, inMsg: `"all"`},
		tc{name: "epoch control character", header: map[string]string{resume.HeaderEpoch: "a\x7fb"}, status: 400, code: resume.CodeInvalidEpoch, inMsg: `"a\x7fb"`},
		tc{name: "epoch long", header: map[string]string{resume.HeaderEpoch: strings.Repeat("e", 65)}, status: 400, code: resume.CodeInvalidEpoch},
		tc{name: "unknown session", session: "nope", status: 404, code: resume.CodeSessionNotFound, inMsg: "nope"},
		tc{name: "closed session", session: "gone", status: 410, code: resume.CodeSessionClosed, inMsg: "gone"},
		tc{name: "subscriber cap", session: "full", status: 429, code: resume.CodeSubscriberLimit, inMsg: "full"},
		tc{name: "authorize", session: "secret", status: 403, code: resume.CodeForbidden, inMsg: "not yours"},
		tc{name: "authorize status", session: "login", status: 401, code: "unauthenticated", inMsg: "log in"},
		tc{name: "POST", method: http.MethodPost, status: 405, code: resume.CodeMethodNotAllowed},
		tc{name: "empty session id", session: "-", status: 400, code: resume.CodeInvalidSessionID, inMsg: "HandlerOptions.SessionID"},
		tc{name: "control character in session id", session: "a\x01b", status: 400, code: resume.CodeInvalidSessionID},
		tc{name: "over-long session id", session: strings.Repeat("x", frame.MaxNameLen+1), status: 400, code: resume.CodeInvalidSessionID},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			session := tt.session
			if session == "" {
				session = "s1"
			} else if session == "-" {
				session = ""
			}
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a wrongly started stream ends
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, method, "/session/x/events?"+tt.query, nil)
			r.SetPathValue("id", session)
			for k, v := range tt.header {
				r.Header[http.CanonicalHeaderKey(k)] = []string{v} // set raw: no validation of the value
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)

			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
			assert.Equal(t, b.Epoch(), w.Header().Get(resume.HeaderEpoch))
			var body struct{ Code, Message string }
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
			assert.Equal(t, tt.code, body.Code)
			assert.NotEmpty(t, body.Message)
			if tt.inMsg != "" {
				assert.Contains(t, body.Message, tt.inMsg)
			}
			if tt.status == 429 {
				assert.Equal(t, "5", w.Header().Get("Retry-After"))
			}
			assert.NotContains(t, w.Body.String(), "retry:", "no stream may start")
			assert.Equal(t, baseline, b.Stats().Subscribers, "no subscriber may stay registered")
		})
	}
	assert.Zero(t, h.Stats().Started)
	assert.EqualValues(t, len(tests), h.Stats().Rejected)
}

func TestHandlerHeadersAndRetryFirst(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "hello", map[string]int{"n": 1})
	h := newHandler(t, b, sse.HandlerOptions{PlainIDs: true})
	srv := serve(t, h, nil)

	s := openRaw(t, srv.URL+"/session/s1/events", nil)
	assert.Equal(t, http.StatusOK, s.resp.StatusCode)
	hd := s.resp.Header
	assert.Equal(t, "text/event-stream", hd.Get("Content-Type"))
	assert.Equal(t, "no-cache, no-transform", hd.Get("Cache-Control"))
	assert.Equal(t, "no", hd.Get("X-Accel-Buffering"))
	assert.Equal(t, b.Epoch(), hd.Get(resume.HeaderEpoch))
	assert.Empty(t, hd.Values("Content-Length"))
	assert.EqualValues(t, -1, s.resp.ContentLength)

	first := make([]byte, len("retry: 3000\n\n"))
	_, err := io.ReadFull(s.resp.Body, first)
	require.NoError(t, err)
	assert.Equal(t, "retry: 3000\n\n", string(first))
	rest := make([]byte, 200)
	n, err := s.resp.Body.Read(rest)
	require.NoError(t, err)
	assert.Equal(t, "id: 1\nevent: hello\ndata: {\"v\":1,\"id\":1,\"type\":\"hello\",\"session\":\"s1\",\"data\":{\"n\":1},\"replay\":true}\n\n",
		string(rest[:n]), "replayed on first connect, one flush per frame")
}

func TestHandlerHeaderNameCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /session/s1/events HTTP/1.1\r\nHost: x\r\nlast-event-id: x9\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	raw, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "HTTP/1.1 400 ")
	assert.Contains(t, string(raw), `{"code":"invalid_last_event_id","message":"invalid Last-Event-ID \"x9\": want decimal digits only, got 'x' at byte 0"}`)
	assert.Zero(t, b.Stats().Subscribers)
}

func TestHandlerOptionsFromQuery(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "hello", nil)
	got := make(chan eventbus.SubscribeOptions, 10)
	h := newHandler(t, b, sse.HandlerOptions{Configure: func(_ *http.Request, o *eventbus.SubscribeOptions) { got <- *o }})
	srv := serve(t, h, nil)

	tests := []struct {
		query  string
		header http.Header
		check  func(t *testing.T, o eventbus.SubscribeOptions)
	}{
		{"", nil, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, scope.Session, o.Scope)
			assert.Nil(t, o.Cursor)
			assert.Equal(t, eventbus.DropSubscriber, o.Policy, "the bus's policy was not set: the stream default")
			assert.False(t, o.NoReplay, "replay the ring on a first connect")
			assert.Zero(t, o.MaxQueued)
			assert.True(t, o.RequireSession)
		}},
		{"scope=descendants&maxQueued=16&replay=0", nil, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, scope.Descendants, o.Scope)
			assert.Equal(t, 16, o.MaxQueued)
			assert.True(t, o.NoReplay)
		}},
		{"maxQueued=2048&replay=1&scope=all", nil, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, scope.All, o.Scope)
			assert.Equal(t, 2048, o.MaxQueued)
			assert.False(t, o.NoReplay)
		}},
		{"last_event_id=&lastEventId=", http.Header{"Last-Event-Id": {""}}, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Nil(t, o.Cursor, "empty means no cursor")
		}},
		{"lastEventId=4", nil, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, &eventbus.Position{ID: 4}, o.Cursor)
		}},
		{"last_event_id=5&lastEventId=4", nil, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, &eventbus.Position{ID: 5}, o.Cursor)
		}},
		{"last_event_id=5", http.Header{"Last-Event-Id": {"0"}}, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, &eventbus.Position{ID: 0}, o.Cursor, "the header wins over the query")
		}},
		{"", http.Header{"Last-Event-Id": {"ep-9"}, resume.HeaderEpoch: {"other"}}, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, &eventbus.Position{ID: 9, Epoch: "ep"}, o.Cursor, "an epoch-qualified id names its epoch")
		}},
		{"", http.Header{resume.HeaderEpoch: {"abc_1"}}, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Nil(t, o.Cursor, "an epoch alone is no cursor")
		}},
		{"lastEventId=4", http.Header{resume.HeaderEpoch: {"abc_1"}}, func(t *testing.T, o eventbus.SubscribeOptions) {
			assert.Equal(t, &eventbus.Position{ID: 4, Epoch: "abc_1"}, o.Cursor, "a plain id takes the header's epoch")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			s := openRaw(t, srv.URL+"/session/s1/events?"+tt.query, tt.header)
			require.Equal(t, http.StatusOK, s.resp.StatusCode)
			tt.check(t, <-got)
			s.close()
		})
	}
}

func TestHandlerSessionClosedEndsResponse(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("parent", ""))
	require.NoError(t, b.CreateSession("child", "parent"))
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)

	s := openRaw(t, srv.URL+"/session/parent/events?scope=descendants&replay=0", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, resume.TypeStreamStart, s.next(t).Type, "a live-only stream opens with where it starts")
	require.NoError(t, b.CloseSession("child"))
	ev := s.next(t)
	assert.Equal(t, frame.TypeSessionClosed, ev.Type)
	assert.Equal(t, "child", ev.Session)
	publish(t, b, "parent", "still", nil)
	assert.Equal(t, "still", s.next(t).Type, "a descendant's close does not end the stream")

	require.NoError(t, b.CloseSession("parent"))
	ev = s.next(t)
	assert.Equal(t, frame.TypeSessionClosed, ev.Type)
	assert.NotZero(t, ev.ID)
	_, err := s.dec.Next()
	assert.ErrorIs(t, err, io.EOF, "the response ends after session_closed")
	waitIdle(t, h, b)
}

func TestHandlerBusCloseEndsResponse(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	s := openRaw(t, srv.URL+"/session/s1/events", nil)
	assert.EqualValues(t, 1, s.next(t).ID)
	require.NoError(t, b.Close())
	_, err := s.dec.Next()
	assert.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return h.Stats().Active == 0 }, 5*time.Second, time.Millisecond)
}

func TestHandlerShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	var streams []*rawStream
	for range 5 {
		s := openRaw(t, srv.URL+"/session/s1/events", nil)
		assert.EqualValues(t, 1, s.next(t).ID)
		streams = append(streams, s)
	}
	assert.Equal(t, 5, h.Stats().Active)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.Shutdown(ctx))
	for _, s := range streams {
		_, err := s.dec.Next()
		assert.ErrorIs(t, err, io.EOF)
	}
	waitIdle(t, h, b)
	require.NoError(t, h.Shutdown(ctx), "idempotent")
	resp, err := http.Get(srv.URL + "/session/s1/events")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a closed handler sends browsers away with retry:, not 503")
}

// A client that stops reading: its live queue overflows, the bus evicts it,
// and the handler writes what was queued, then client_evicted, then ends.
func TestHandlerEvictionEndsResponse(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "first", nil)
	h := newHandler(t, b, sse.HandlerOptions{})

	w := newRecorder()
	w.gate = make(chan struct{})
	r := httptest.NewRequest(http.MethodGet, "/session/s1/events?maxQueued=16&replay=0", nil)
	r.SetPathValue("id", "s1")
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(w, r) }()
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	for range 100 { // the handler blocks writing the first; 16 fit in the queue
		publish(t, b, "s1", "tick", nil)
	}
	require.Eventually(t, func() bool { return b.Stats().Evicted == 1 }, 5*time.Second, time.Millisecond)
	close(w.gate)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the response did not end after client_evicted")
	}
	evs := frames(t, w.body())
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	assert.Equal(t, frame.TypeClientEvicted, last.Type)
	assert.Zero(t, last.ID)
	var data frame.ClientEvictedData
	require.NoError(t, json.Unmarshal(last.Data, &data))
	assert.Equal(t, ids(evs)[len(ids(evs))-1]+1, data.DroppedAfter, "resume point follows the last id written")
	assert.Equal(t, seq(2, uint64(1+len(ids(evs)))), ids(evs))
	waitIdle(t, h, b)
}

// A client that goes before reading a byte must not keep its slot under
// the subscriber cap.
func TestHandlerClientDropsBeforeFirstByte(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxSubscribers: 1})
	publish(t, b, "s1", "a", nil)
	h := newHandler(t, b, sse.HandlerOptions{})
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewUnstartedServer(mux)
	var closed atomic.Int32 // connections the server has finished with
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	addr := srv.Listener.Addr().String()

	for range 20 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /session/s1/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	// The server must be done with every dropped connection before idle
	// means that none of them will still take the slot.
	require.Eventually(t, func() bool { return closed.Load() == 20 },
		10*time.Second, time.Millisecond, "the server closes the 20 dropped connections")
	waitIdle(t, h, b)

	s := openRaw(t, srv.URL+"/session/s1/events", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode, "the slot is free again")
	assert.EqualValues(t, 1, s.next(t).ID)
	s.close()
	waitIdle(t, h, b)
}

func TestHandlerCustomSessionID(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s/1", "a", nil)
	var gotScope scope.Kind
	h := newHandler(t, b, sse.HandlerOptions{
		SessionID: func(r *http.Request) string { return r.URL.Query().Get("session") },
		Authorize: func(_ *http.Request, _ string, sc scope.Kind) error { gotScope = sc; return nil },
	})
	srv := httptest.NewServer(h) // no ServeMux pattern at all
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	s := openRaw(t, srv.URL+"/anything?session="+url.QueryEscape("s/1")+"&scope=subtree", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	ev := s.next(t)
	assert.Equal(t, "s/1", ev.Session)
	assert.Equal(t, scope.Subtree, gotScope)
}

func TestNewHandlerNilBus(t *testing.T) {
	t.Parallel()
	_, err := sse.NewHandler(nil, sse.HandlerOptions{})
	require.Error(t, err)
}

// TestNewHandlerRefusesBadOverflowPolicy: a misspelt or refused
// HandlerOptions.OverflowPolicy is the server's mistake, named by
// NewHandler (errors.Is eventbus.ErrInvalid) — not a 400 invalid_argument
// blamed on every client that subscribes.
func TestNewHandlerRefusesBadOverflowPolicy(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for _, p := range []eventbus.OverflowPolicy{"drop-oldest", "block", "DropOldest"} {
		_, err := sse.NewHandler(b, sse.HandlerOptions{OverflowPolicy: p})
		require.ErrorIs(t, err, eventbus.ErrInvalid, p)
		assert.Contains(t, err.Error(), "OverflowPolicy", p)
		assert.Contains(t, err.Error(), string(p))
	}
	for _, p := range []eventbus.OverflowPolicy{"", eventbus.DropSubscriber, eventbus.DropOldest, eventbus.DropNewest} {
		h, err := sse.NewHandler(b, sse.HandlerOptions{OverflowPolicy: p})
		require.NoError(t, err, p)
		_ = h.Close()
	}
}

// A peer that stops reading cannot pin the stream: once the socket buffers
// are full, the write deadline ends the stream.
func TestHandlerWriteTimeout(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxQueueSize: 1_000_000, MaxQueuedBytes: 1 << 30})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{WriteTimeout: 100 * time.Millisecond})
	srv := serve(t, h, nil)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /session/s1/events?replay=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)

	payload := strings.Repeat("x", 64<<10)
	// Publish until the stream hits its write deadline (checked every 5 ms).
	require.Eventually(t, func() bool {
		for range 16 {
			_, err := b.Publish("s1", "big", payload)
			assert.NoError(t, err)
		}
		return h.Stats().WriteErrors > 0
	}, 20*time.Second, 5*time.Millisecond, "the stream never hit its write deadline")
	waitIdle(t, h, b)
	assert.EqualValues(t, 1, h.Stats().WriteErrors)
	assert.Zero(t, b.Stats().Evicted, "ended by the deadline, not by eviction")
}

// ?events=message leaves the event: line out so that a browser's onmessage
// sees every frame; the type stays in the envelope.
func TestHandlerEventsMessage(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "hello", map[string]int{"n": 1})
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1, PlainIDs: true})
	srv := serve(t, h, nil)

	s := openRaw(t, srv.URL+"/session/s1/events?events=message", nil)
	rest := make([]byte, 200)
	n, err := s.resp.Body.Read(rest)
	require.NoError(t, err)
	assert.Equal(t, "id: 1\ndata: {\"v\":1,\"id\":1,\"type\":\"hello\",\"session\":\"s1\",\"data\":{\"n\":1},\"replay\":true}\n\n",
		string(rest[:n]))
}

// The overflow default rule (eventbus.Options.OverflowPolicy): with the bus's
// policy unset, SSE subscribers get drop_subscriber — their clients resume
// by themselves — while in-process subscribers get drop_oldest; a policy set
// on the bus (env var or code) applies to SSE subscribers too.
func TestHandlerOverflowDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		bus  eventbus.OverflowPolicy
		want eventbus.OverflowPolicy // what the handler asks for; "" = the bus's
	}{
		{"unset: drop_subscriber", "", eventbus.DropSubscriber},
		{"explicit drop_oldest", eventbus.DropOldest, ""},
		{"explicit drop_newest", eventbus.DropNewest, ""},
		{"explicit drop_subscriber", eventbus.DropSubscriber, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{OverflowPolicy: tt.bus})
			assert.Equal(t, tt.bus != "", b.OverflowPolicySet())
			assert.Equal(t, cmp.Or(tt.bus, eventbus.DropOldest), b.Options().OverflowPolicy, "Options shows the policy in force in process")
			got := make(chan eventbus.SubscribeOptions, 1)
			h := newHandler(t, b, sse.HandlerOptions{Configure: func(_ *http.Request, o *eventbus.SubscribeOptions) { got <- *o }})
			srv := serve(t, h, nil)
			require.NoError(t, b.CreateSession("s1", ""))
			s := openRaw(t, srv.URL+"/session/s1/events", nil)
			require.Equal(t, http.StatusOK, s.resp.StatusCode)
			assert.Equal(t, tt.want, (<-got).Policy)
			s.close()
		})
	}
}

// TestHandlerRefusesMisspelledQueryParameter: ?lastEventID=5 (Mercure's
// spelling) used to resume nothing and say nothing. A parameter that is a
// case or separator variant, or a near miss, of one the endpoint reads is a
// 400 unknown_query_parameter naming it and the name it resembles; nothing
// is subscribed.
func TestHandlerRefusesMisspelledQueryParameter(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "t", 1)
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	for _, tc := range []struct{ query, like string }{
		{"lastEventID=5", "lastEventId"},
		{"LastEventId=5", "lastEventId"},
		{"lasteventid=5", "lastEventId"},
		{"Last-Event-ID=5", "last_event_id"},
		{"last-event-id=5", "last_event_id"},
		{"last_event_ID=5", "last_event_id"},
		{"LAST_EVENT_ID=5", "last_event_id"},
		{"last.event.id=5", "last_event_id"},
		{"lastEvntId=5", "lastEventId"},
		{"lastEventIds=5", "lastEventId"},
		{"maxqueued=64", "maxQueued"},
		{"max_queued=64", "maxQueued"},
		{"maxQueue=64", "maxQueued"},
		{"MaxQueued=64", "maxQueued"},
		{"Scope=all", "scope"},
		{"scopes=all", "scope"},
		{"scoep=all", "scope"},
		{"Replay=0", "replay"},
		{"event=message", "events"},
		{"Events=message", "events"},
		{"coalese=acp", "coalesce"},
		{"Coalesce=acp", "coalesce"},
		{"coalesce=acp&throtle=150ms", "throttle"},
		{"token=x&lastEventID=5", "lastEventId"}, // an unrelated parameter beside it changes nothing
	} {
		t.Run(tc.query, func(t *testing.T) {
			w := serveDirect(t, h, tc.query, nil)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			code, msg := errorBody(t, w)
			assert.Equal(t, resume.CodeUnknownParameter, code)
			bad, _, _ := cutParam(tc.query)
			assert.Contains(t, msg, `"`+bad+`"`, "names the bad parameter")
			assert.Contains(t, msg, "did you mean "+tc.like+"?", "names the parameter it resembles")
		})
	}
	assert.Zero(t, b.Stats().Subscribers, "a refused request registers no subscriber")
	assert.Zero(t, h.Stats().Started)
}

// TestHandlerIgnoresUnrelatedQueryParameters: parameters an embedder puts on
// the URL (a token its Authorize hook reads, jQuery's ?_= cache-buster, a
// version) are not refused by default, and the known ones beside them still
// work.
func TestHandlerIgnoresUnrelatedQueryParameters(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for i := range 3 {
		publish(t, b, "s1", "t", i)
	}
	tokens := make(chan string, 16)
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1, Authorize: func(r *http.Request, _ string, _ scope.Kind) error {
		tokens <- r.URL.Query().Get("token")
		return nil
	}})
	srv := serve(t, h, nil)
	for _, q := range []string{
		"token=abc&lastEventId=1",
		"_=1712345678901&lastEventId=1",
		"v=2&t=9&cb=x&lastEventId=1",
		"access_token=abc&session=s1&id=7&format=json&lang=de&lastEventId=1",
		"utm_source=mail&nocache=1&lastEventId=1",
	} {
		s := openRaw(t, srv.URL+"/session/s1/events?"+q, nil)
		assert.Equal(t, uint64(2), s.next(t).ID, "%s: resumes after 1", q)
		s.close()
	}
	assert.Equal(t, "abc", <-tokens, "the Authorize hook still sees the embedder's parameter")
	waitIdle(t, h, b)
}

// TestHandlerStrictQuery: with HandlerOptions.Query.Strict every parameter
// the endpoint does not read is refused, naming it and the accepted names,
// except those listed in Query.Allow — which are also exempt from the
// look-alike rule in the default mode.
func TestHandlerStrictQuery(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "t", 1)

	strict := newHandler(t, b, sse.HandlerOptions{Retry: -1, Query: resume.QueryRules{Strict: true, Allow: []string{"token"}}})
	w := serveDirect(t, strict, "scope=session&cb=1", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	code, msg := errorBody(t, w)
	assert.Equal(t, resume.CodeUnknownParameter, code)
	assert.Contains(t, msg, `unknown query parameter "cb"`)
	assert.Contains(t, msg, "lastEventId")
	// A look-alike gets the suggestion in strict mode too.
	w = serveDirect(t, strict, "lastEventID=1", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	_, msg = errorBody(t, w)
	assert.Contains(t, msg, "did you mean lastEventId?")

	srv := serve(t, strict, nil)
	s := openRaw(t, srv.URL+"/session/s1/events?token=abc&scope=session", nil)
	assert.Equal(t, uint64(1), s.next(t).ID, "an allowed parameter passes in strict mode")
	s.close()

	// Default mode: Allow exempts an application's own look-alike.
	lax := newHandler(t, b, sse.HandlerOptions{Retry: -1, Query: resume.QueryRules{Allow: []string{"event"}}})
	srv = serve(t, lax, nil)
	s = openRaw(t, srv.URL+"/session/s1/events?event=mine", nil)
	assert.Equal(t, uint64(1), s.next(t).ID)
	s.close()
	waitIdle(t, strict, b)
	waitIdle(t, lax, b)
}

// Issue 27.10: under another router (chi, a mux pattern without {id}) the
// path value is empty and the handler answered 400 invalid_session_id
// "empty session id", without the cause. It names where the id should
// come from.
func TestEmptySessionIDNamesTheCause(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for _, tc := range []struct {
		name string
		o    sse.HandlerOptions
		want []string
	}{
		{"no {id} path value", sse.HandlerOptions{}, []string{"{id} path value", "HandlerOptions.SessionID"}},
		{"SessionID returned empty", sse.HandlerOptions{SessionID: func(*http.Request) string { return "" }},
			[]string{"HandlerOptions.SessionID returned an empty id", `"/api/runs/r1/stream"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(t, b, tc.o)
			srv := httptest.NewServer(h) // mounted at the root: no pattern, no {id}
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/api/runs/r1/stream")
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var body struct{ Code, Message string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, resume.CodeInvalidSessionID, body.Code)
			for _, w := range tc.want {
				assert.Contains(t, body.Message, w)
			}
		})
	}
}

// Handler.Close that comes while streams are being opened ends every one of
// them: a stream on its request's context is ended by closing its
// subscription, and one subscribed just after Close sees it and goes away
// (200 and a retry: line), so that no ServeHTTP is left waiting.
func TestHandlerCloseWhileStreamsOpen(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		b := newBus(t, eventbus.Options{})
		publish(t, b, "s1", "a", nil)
		h := newHandler(t, b, sse.HandlerOptions{})
		var wg sync.WaitGroup
		recs := make([]*recorder, 8)
		for i := range recs {
			recs[i] = newRecorder()
			r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
			r.SetPathValue("id", "s1")
			wg.Go(func() { h.ServeHTTP(recs[i], r) })
		}
		if round%2 == 1 {
			time.Sleep(time.Duration(round) * 50 * time.Microsecond)
		}
		require.NoError(t, h.Close())
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a stream outlived Handler.Close", round)
		}
		for _, w := range recs {
			assert.Equal(t, http.StatusOK, w.status)
		}
		assert.Zero(t, h.Stats().Active)
		assert.Zero(t, b.Stats().Subscribers)
	}
}
