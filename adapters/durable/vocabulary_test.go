package durable_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// One cause, one code: the Durable Streams route answers the causes it
// shares with the SSE route (an unknown session, a session id the bus
// refuses, the subscriber cap, a closed session, a producer refused) with
// resume's codes, as the SSE route does on the same bus — only the status
// of a closed stream differs, as PROTOCOL.md asks (409 with Stream-Closed).
// Values the client sent are quoted and cut to 64 bytes as on every route.
func TestDurableAnswersSpeakTheSharedVocabulary(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1", MaxSubscribers: 1})
	require.NoError(t, err)
	dh, err := durable.NewHandler(bus, durable.HandlerOptions{LongPollTimeout: 30 * time.Second})
	require.NoError(t, err)
	sh, err := sse.NewHandler(bus, sse.HandlerOptions{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(durable.Pattern, dh)
	mux.Handle(sse.Pattern, sh)
	srv := httptest.NewServer(mux)
	defer func() {
		srv.Close()
		_ = bus.Close()
	}()
	answer := func(method, path, body string, hdr ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code, resp.Header
	}

	// An unknown session.
	status, code, _ := answer("GET", "/v1/stream/nobody?offset=-1", "")
	assert.Equal(t, [2]any{404, resume.CodeSessionNotFound}, [2]any{status, code}, "durable")
	status, code, _ = answer("GET", "/session/nobody/events", "")
	assert.Equal(t, [2]any{404, resume.CodeSessionNotFound}, [2]any{status, code}, "sse")

	// A session id the bus refuses.
	status, code, _ = answer("GET", "/v1/stream/a%01b?offset=-1", "")
	assert.Equal(t, [2]any{400, resume.CodeInvalidSessionID}, [2]any{status, code}, "durable")
	status, code, _ = answer("GET", "/session/a%01b/events", "")
	assert.Equal(t, [2]any{400, resume.CodeInvalidSessionID}, [2]any{status, code}, "sse")

	// The subscriber cap (1): a long-poll holds the only slot.
	status, _, _ = answer("PUT", "/v1/stream/busy", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, status)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(srv.URL + "/v1/stream/busy?live=long-poll&offset=now")
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(bus)["busy"] == 1 }, 10*time.Second, time.Millisecond)
	status, code, hdr := answer("GET", "/v1/stream/busy?offset=-1", "")
	assert.Equal(t, [3]any{429, resume.CodeSubscriberLimit, "5"}, [3]any{status, code, hdr.Get("Retry-After")}, "durable")
	status, code, hdr = answer("GET", "/session/busy/events", "")
	assert.Equal(t, [3]any{429, resume.CodeSubscriberLimit, "5"}, [3]any{status, code, hdr.Get("Retry-After")}, "sse")
	status, _, _ = answer("POST", "/v1/stream/busy", `{"n":1}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusNoContent, status, "the append ends the long-poll")
	<-done

	// A producer refused.
	p := []string{"Content-Type", "application/json", "Producer-Id", "w", "Producer-Epoch", "1", "Producer-Seq", "0"}
	status, _, _ = answer("POST", "/v1/stream/busy", `1`, p...)
	require.Equal(t, http.StatusOK, status)
	status, code, hdr = answer("POST", "/v1/stream/busy", `2`, "Content-Type", "application/json", "Producer-Id", "w", "Producer-Epoch", "0", "Producer-Seq", "0")
	assert.Equal(t, [3]any{403, resume.CodeStaleProducerEpoch, "1"}, [3]any{status, code, hdr.Get("Producer-Epoch")})
	status, code, hdr = answer("POST", "/v1/stream/busy", `2`, "Content-Type", "application/json", "Producer-Id", "w", "Producer-Epoch", "1", "Producer-Seq", "5")
	assert.Equal(t, [3]any{409, resume.CodeProducerSeqGap, "1"}, [3]any{status, code, hdr.Get("Producer-Expected-Seq")})

	// A closed session: 410 on the SSE route, 409 with Stream-Closed on a
	// Durable Stream (PROTOCOL.md §5.2), one code.
	require.NoError(t, bus.CloseSession("busy"))
	status, code, hdr = answer("POST", "/v1/stream/busy", `3`, "Content-Type", "application/json")
	assert.Equal(t, [3]any{409, resume.CodeSessionClosed, "true"}, [3]any{status, code, hdr.Get("Stream-Closed")}, "durable")
	status, code, _ = answer("GET", "/session/busy/events", "")
	assert.Equal(t, [2]any{410, resume.CodeSessionClosed}, [2]any{status, code}, "sse")

	// A method the route does not take, and a long value quoted short.
	status, code, hdr = answer("PATCH", "/v1/stream/x", "")
	assert.Equal(t, [3]any{405, resume.CodeMethodNotAllowed, "GET, HEAD, PUT, POST, DELETE, OPTIONS"}, [3]any{status, code, hdr.Get("Allow")})
	status, _, _ = answer("PUT", "/v1/stream/q", "", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, status)
	long := "text/" + strings.Repeat("x", 300)
	req, err := http.NewRequest("POST", srv.URL+"/v1/stream/q", strings.NewReader("a"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", long)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var e struct{ Code, Message string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	_ = resp.Body.Close()
	assert.Equal(t, "content_type_mismatch", e.Code)
	assert.Contains(t, e.Message, "…(305 bytes)", "cut to 64 bytes: %s", e.Message)
}

// A session closed by another route, which the Durable Streams handler
// never served, is 410 session_closed on /v1/stream as on the SSE route —
// reads, HEAD, live reads and DELETE alike (it was 404 session_not_found,
// as if it had never existed); an append to it is the protocol's closed
// stream (409 session_closed with Stream-Closed: true, PROTOCOL.md §5.2).
// A stream the handler deleted (or expired) is 404, as PROTOCOL.md asks of
// a deleted stream, although its bus session id is closed too.
func TestClosedSessionIsGoneOnEveryRoute(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	dh, err := durable.NewHandler(bus, durable.HandlerOptions{LongPollTimeout: 30 * time.Second})
	require.NoError(t, err)
	sh, err := sse.NewHandler(bus, sse.HandlerOptions{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(durable.Pattern, dh)
	mux.Handle(sse.Pattern, sh)
	srv := httptest.NewServer(mux)
	defer func() {
		srv.Close()
		_ = dh.Close()
		_ = bus.Close()
	}()
	answer := func(method, path, body string, hdr ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code, resp.Header
	}

	require.NoError(t, bus.CreateSession("run", ""))
	_, err = bus.Publish("run", "agent_message_chunk", map[string]string{"text": "hi"})
	require.NoError(t, err)
	require.NoError(t, bus.CloseSession("run"))

	status, code, _ := answer("GET", "/session/run/events", "")
	require.Equal(t, [2]any{410, resume.CodeSessionClosed}, [2]any{status, code}, "sse")
	for _, path := range []string{"run", "run?offset=-1", "run?offset=now", "run?offset=-1&live=long-poll", "run?offset=now&live=sse"} {
		status, code, _ = answer("GET", "/v1/stream/"+path, "")
		assert.Equal(t, [2]any{410, resume.CodeSessionClosed}, [2]any{status, code}, "GET %s", path)
	}
	status, _, _ = answer("HEAD", "/v1/stream/run", "")
	assert.Equal(t, 410, status, "HEAD")
	status, code, _ = answer("DELETE", "/v1/stream/run", "")
	assert.Equal(t, [2]any{410, resume.CodeSessionClosed}, [2]any{status, code}, "DELETE")
	status, code, hdr := answer("POST", "/v1/stream/run", `{"n":1}`, "Content-Type", "application/json")
	assert.Equal(t, [3]any{409, resume.CodeSessionClosed, "true"}, [3]any{status, code, hdr.Get("Stream-Closed")}, "append")

	// Deleted through the handler: 404, the protocol's deleted stream.
	status, _, _ = answer("PUT", "/v1/stream/del", `{"n":1}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, status)
	status, _, _ = answer("DELETE", "/v1/stream/del", "")
	require.Equal(t, http.StatusNoContent, status)
	require.True(t, bus.SessionClosed("del"), "DELETE closes the session")
	status, code, _ = answer("GET", "/v1/stream/del?offset=-1", "")
	assert.Equal(t, [2]any{404, resume.CodeSessionNotFound}, [2]any{status, code}, "a deleted stream")
	status, code, _ = answer("POST", "/v1/stream/del", "", "Stream-Closed", "true")
	assert.Equal(t, [2]any{404, resume.CodeSessionNotFound}, [2]any{status, code}, "a deleted stream's close")
	// Created again by another route, read, then closed there: the
	// stream's EOF (a closed stream the handler read reads as closed).
	require.NoError(t, bus.CreateSession("del", ""))
	status, _, _ = answer("GET", "/v1/stream/del?offset=-1", "")
	require.Equal(t, http.StatusOK, status, "served again")
	require.NoError(t, bus.CloseSession("del"))
	status, _, hdr = answer("GET", "/v1/stream/del?offset=-1", "")
	assert.Equal(t, [2]any{200, "true"}, [2]any{status, hdr.Get("Stream-Closed")}, "the record's EOF")
}
