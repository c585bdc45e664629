package server

import (
	"bufio"
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
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newServer(t *testing.T, o Options) *Server {
	t.Helper()
	return newServerBus(t, eventbus.Options{}, o)
}

// newServerBus is newServer over a bus with options bo.
func newServerBus(t *testing.T, bo eventbus.Options, o Options) *Server {
	t.Helper()
	bus, err := eventbus.New(bo)
	require.NoError(t, err)
	s, err := New(bus, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Close()
		_ = bus.Close()
	})
	return s
}

// do runs one request against s and returns the status, the headers and the
// decoded JSON body (nil when there is none).
func do(t *testing.T, s http.Handler, method, target, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "body %q", rec.Body.String())
	}
	return rec.Code, rec.Header(), out
}

func TestCreateSession(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("root", ""))
	require.NoError(t, s.Bus().CreateSession("gone", ""))
	require.NoError(t, s.Bus().CloseSession("gone"))

	for _, tc := range []struct {
		name, body string
		status     int
		code, id   string
	}{
		{"explicit id", `{"id":"a1"}`, http.StatusCreated, "", "a1"},
		{"with parent", `{"id":"child","parent":"root"}`, http.StatusCreated, "", "child"},
		{"duplicate", `{"id":"root"}`, http.StatusConflict, "session_exists", ""},
		{"unknown parent", `{"id":"orphan","parent":"nope"}`, http.StatusNotFound, "parent_not_found", ""},
		{"closed parent", `{"id":"late","parent":"gone"}`, http.StatusGone, "session_closed", ""},
		{"closed id reopens", `{"id":"gone"}`, http.StatusCreated, "", "gone"},
		{"slash in id", `{"id":"a/b"}`, http.StatusBadRequest, "invalid_session_id", ""},
		{"control character", `{"id":"a\nb"}`, http.StatusBadRequest, "invalid_session_id", ""},
		{"explicit empty id", `{"id":""}`, http.StatusBadRequest, "invalid_session_id", ""}, // issue 27.5: it created a session with a generated id
		{"not json", `{"id":`, http.StatusBadRequest, "invalid_json", ""},
		{"unknown field", `{"name":"x"}`, http.StatusBadRequest, "invalid_json", ""},
		{"trailing data", `{"id":"t1"} {}`, http.StatusBadRequest, "invalid_json", ""},
		{"array", `[]`, http.StatusBadRequest, "invalid_json", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, s, http.MethodPost, "/sessions", tc.body)
			assert.Equal(t, tc.status, status, "%v", body)
			if tc.code != "" {
				assert.Equal(t, tc.code, body["code"])
				assert.NotEmpty(t, body["message"])
			}
			if tc.id != "" {
				assert.Equal(t, tc.id, body["id"])
				assert.True(t, s.Bus().SessionExists(tc.id))
			}
		})
	}

	t.Run("generated id", func(t *testing.T) {
		for _, body := range []string{"", "{}", `{"parent":"root"}`, `{"id":null}`} {
			status, _, out := do(t, s, http.MethodPost, "/sessions", body)
			require.Equal(t, http.StatusCreated, status)
			id, _ := out["id"].(string)
			assert.Regexp(t, `^s-[0-9a-f]{12}$`, id)
			assert.True(t, s.Bus().SessionExists(id))
		}
	})
}

func TestPublish(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("closed", ""))
	require.NoError(t, s.Bus().CloseSession("closed"))
	require.NoError(t, s.Bus().CreateSession("s1", ""))

	status, _, out := do(t, s, http.MethodPost, "/session/s1/events", `{"type":"note","data":{"text":"hi"}}`)
	require.Equal(t, http.StatusAccepted, status)
	assert.EqualValues(t, 2, out["id"], "id 1 went to closed's session_closed")
	status, _, out = do(t, s, http.MethodPost, "/session/s1/events", `{"type":"ping","origin":"client-7"}`)
	require.Equal(t, http.StatusAccepted, status)
	assert.EqualValues(t, 3, out["id"])

	sub, err := s.Bus().Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	ev, err := sub.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "note", ev.Type)
	assert.JSONEq(t, `{"text":"hi"}`, string(ev.Data))
	ev, err = sub.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "client-7", ev.Origin)
	assert.Empty(t, ev.Data)

	for _, tc := range []struct {
		name, target, body string
		status             int
		code               string
	}{
		{"missing type", "/session/s1/events", `{"data":1}`, http.StatusBadRequest, "invalid_argument"},
		{"empty body", "/session/s1/events", ``, http.StatusBadRequest, "invalid_json"},
		{"bad json", "/session/s1/events", `{"type":}`, http.StatusBadRequest, "invalid_json"},
		{"newline in type", "/session/s1/events", `{"type":"a\nb"}`, http.StatusBadRequest, "invalid_argument"},
		{"closed session", "/session/closed/events", `{"type":"x"}`, http.StatusGone, "session_closed"},
		{"unknown session (a typo)", "/session/dmeo/events", `{"type":"x"}`, http.StatusNotFound, "session_not_found"},
		{"too large", "/session/s1/events", `{"type":"x","data":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, s, http.MethodPost, tc.target, tc.body)
			assert.Equal(t, tc.status, status, "%v", body)
			assert.Equal(t, tc.code, body["code"])
		})
	}
	assert.EqualValues(t, 3, s.Bus().LastEventID(), "refused events consume no id")
}

func TestDeleteSession(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("p", ""))
	require.NoError(t, s.Bus().CreateSession("c", "p"))
	require.NoError(t, s.Bus().CreateSession("q", ""))
	require.NoError(t, s.Bus().CreateSession("qc", "q"))

	status, _, _ := do(t, s, http.MethodDelete, "/session/p", "")
	assert.Equal(t, http.StatusNoContent, status)
	assert.False(t, s.Bus().SessionExists("p"))
	assert.True(t, s.Bus().SessionExists("c"), "children survive without cascade")

	status, _, _ = do(t, s, http.MethodDelete, "/session/p", "")
	assert.Equal(t, http.StatusNoContent, status, "closing is idempotent")

	status, _, body := do(t, s, http.MethodDelete, "/session/nope", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "session_not_found", body["code"])

	status, _, body = do(t, s, http.MethodDelete, "/session/q?cascade=maybe", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "invalid_argument", body["code"])

	status, _, _ = do(t, s, http.MethodDelete, "/session/q?cascade=1", "")
	assert.Equal(t, http.StatusNoContent, status)
	assert.False(t, s.Bus().SessionExists("qc"), "cascade closes the descendants")
}

func TestListSessions(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("b", ""))
	require.NoError(t, s.Bus().CreateSession("a", "b"))
	_, err := s.Bus().Publish("a", "x", nil)
	require.NoError(t, err)

	req := httptest.NewRequest(http.MethodGet, "/sessions", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	var list []observe.SessionInfo
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	assert.Equal(t, []observe.SessionInfo{
		{ID: "a", Parent: "b", Buffered: 1, LastEventID: 1},
		{ID: "b"},
	}, list)
}

func TestHealthzInfoAndRouting(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{DefaultSession: "demo", DefaultScope: scope.Descendants, Types: []string{"plan"}})

	status, _, body := do(t, s, http.MethodGet, "/healthz", "")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body["status"])

	require.NoError(t, s.Bus().CreateSession("x", ""))
	status, _, _ = do(t, s, http.MethodPost, "/session/x/events", `{"type":"custom_type"}`)
	require.Equal(t, http.StatusAccepted, status)
	status, _, body = do(t, s, http.MethodGet, "/info", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, s.Bus().Epoch(), body["epoch"])
	assert.Equal(t, "demo", body["defaultSession"])
	assert.Equal(t, "descendants", body["defaultScope"])
	assert.EqualValues(t, 1, body["lastEventId"])
	types, _ := body["types"].([]any)
	for _, want := range []string{"plan", "custom_type", "session_closed", "replay_complete", "state_resync_required"} {
		assert.Contains(t, types, want)
	}

	status, _, body = do(t, s, http.MethodGet, "/nope", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found", body["code"])

	status, hdr, body := do(t, s, http.MethodPut, "/sessions", "")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, "method_not_allowed", body["code"])
	assert.Contains(t, hdr.Get("Allow"), "POST")

	status, _, body = do(t, s, http.MethodGet, "/session/unknown/events", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, resume.CodeSessionNotFound, body["code"])

	status, _, body = do(t, s, http.MethodGet, "/session/x/events?lastEventId=abc", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, resume.CodeInvalidLastEventID, body["code"])
}

func TestPage(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `<pre id="ids">`},
		{"/static/app.js", "javascript", "window.receivedIds"},
		{"/static/style.css", "text/css", ".row.t-agent_message_chunk"},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, tc.path)
		assert.Contains(t, rec.Header().Get("Content-Type"), tc.ctype, tc.path)
		assert.Contains(t, rec.Body.String(), tc.contains, tc.path)
	}
	status, _, _ := do(t, s, http.MethodGet, "/static/missing.js", "")
	assert.Equal(t, http.StatusNotFound, status)
}

// TestStreamAndClose: a real stream over a loopback server delivers a
// published event, and Close ends the open stream cleanly so that
// http.Server.Shutdown does not wait for it.
func TestStreamAndClose(t *testing.T) {
	t.Parallel()
	var wrapped int
	s := newServer(t, Options{WrapEvents: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			wrapped++
			h.ServeHTTP(w, r)
		})
	}})
	ts := httptest.NewServer(s)
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	require.NoError(t, s.Bus().CreateSession("live", ""))
	resp, err := client.Get(ts.URL + "/session/live/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, 1, wrapped, "WrapEvents wraps the SSE route")

	status, _, _ := do(t, s, http.MethodPost, "/session/live/events", `{"type":"hello","data":{"n":1}}`)
	require.Equal(t, http.StatusAccepted, status)

	br := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 6 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		lines = append(lines, strings.TrimRight(line, "\n"))
	}
	assert.Equal(t, []string{"retry: 3000", "", "id: " + s.Bus().Epoch() + "-1", "event: hello",
		`data: {"v":1,"id":1,"type":"hello","session":"live","data":{"n":1}}`, ""}, lines)

	closed := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(br)
		closed <- err
	}()
	start := time.Now()
	require.NoError(t, s.Close())
	select {
	case err := <-closed:
		assert.NoError(t, err, "the stream ends with a clean end of body")
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after Close")
	}
	assert.Less(t, time.Since(start), 2*time.Second)

	resp2, err := client.Get(ts.URL + "/session/live/events")
	require.NoError(t, err)
	body2, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	assert.Equal(t, http.StatusOK, resp2.StatusCode, "a closed server sends browsers away with retry:, not a 503 that ends EventSource")
	assert.True(t, strings.HasPrefix(string(body2), "retry: "), "%q", body2)
}

// Input 1 over HTTP: POST /sessions with a closed session's id reopens it
// (201, ACP session/resume), and its streams work again: a client that
// resumes with a Last-Event-ID from before the close gets the rest of the
// old history, the session_closed event and the new events.
func TestInput1ReopenOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("root", ""))
	status, _, _ := do(t, s, http.MethodPost, "/sessions", `{"id":"agent","parent":"root"}`)
	require.Equal(t, http.StatusCreated, status)
	for _, typ := range []string{"one", "two"} {
		status, _, _ = do(t, s, http.MethodPost, "/session/agent/events", `{"type":"`+typ+`"}`)
		require.Equal(t, http.StatusAccepted, status)
	}
	status, _, _ = do(t, s, http.MethodDelete, "/session/agent", "")
	require.Equal(t, http.StatusNoContent, status)
	status, _, body := do(t, s, http.MethodPost, "/session/agent/events", `{"type":"late"}`)
	require.Equal(t, http.StatusGone, status, "a late publish to a closed session stays refused")
	assert.Equal(t, "session_closed", body["code"])

	status, _, body = do(t, s, http.MethodPost, "/sessions", `{"id":"agent","parent":"root"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	status, _, _ = do(t, s, http.MethodPost, "/session/agent/events", `{"type":"three"}`)
	require.Equal(t, http.StatusAccepted, status)

	ts := httptest.NewServer(s)
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/session/agent/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	var events []string
	for len(events) < 4 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if typ, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "event: "); ok {
			events = append(events, typ)
		}
	}
	assert.Equal(t, []string{"two", "session_closed", "three", "replay_complete"}, events)
	require.NoError(t, s.Close())
}

// Input 7: a typo does not create a session: POST /session/{unknown}/events
// is 404 as GET answers, while the library's Publish keeps AgentPool's
// create-on-first-publish.
func TestInput7TypoCreatesNoSession(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("demo", ""))
	status, _, body := do(t, s, http.MethodPost, "/session/dmeo/events", `{"type":"note"}`)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "session_not_found", body["code"])
	assert.False(t, s.Bus().SessionExists("dmeo"), "nothing was created")
	assert.Zero(t, s.Bus().LastEventID(), "and no id consumed")
	status, _, body = do(t, s, http.MethodGet, "/session/dmeo/events", "")
	assert.Equal(t, http.StatusNotFound, status, "GET answers the same")
	assert.Equal(t, "session_not_found", body["code"])
	status, _, _ = do(t, s, http.MethodDelete, "/session/dmeo", "")
	assert.Equal(t, http.StatusNotFound, status, "and so does DELETE")

	_, err := s.Bus().Publish("dmeo", "note", nil)
	require.NoError(t, err, "the library still creates on first publish")
	assert.True(t, s.Bus().SessionExists("dmeo"))
}
