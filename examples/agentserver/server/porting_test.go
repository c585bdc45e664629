package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
