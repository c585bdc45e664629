package durable_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// Over HTTP/2 a write deadline left in place resets the stream when it
// passes, even while nothing is written: a long-poll and an SSE answer
// that wait longer than WriteTimeout must still deliver what comes after.
func TestHTTP2LiveReadsOutliveWriteTimeout(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	defer bus.Close()
	const wt = 300 * time.Millisecond
	h, err := durable.NewHandler(bus, durable.HandlerOptions{WriteTimeout: wt, LongPollTimeout: time.Minute})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer h.Close()
	base := srv.URL + durable.Pattern
	req, err := http.NewRequest(http.MethodPut, base+"s", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor, "the test needs HTTP/2")
	_ = resp.Body.Close()
	tail := resp.Header.Get("Stream-Next-Offset")

	type answer struct {
		status int
		body   string
		err    error
	}
	longPoll := make(chan answer, 1)
	go func() {
		resp, err := srv.Client().Get(base + "s?live=long-poll&offset=" + tail)
		if err != nil {
			longPoll <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		longPoll <- answer{resp.StatusCode, string(b), err}
	}()
	sse, err := srv.Client().Get(base + "s?live=sse&offset=" + tail)
	require.NoError(t, err)
	defer sse.Body.Close()
	require.Equal(t, http.StatusOK, sse.StatusCode)
	sc := bufio.NewScanner(sse.Body)
	require.True(t, sc.Scan(), "the first control event")
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(bus)["s"] == 2 }, 10*time.Second, time.Millisecond)

	time.Sleep(3 * wt) // quiet for longer than WriteTimeout
	req, err = http.NewRequest(http.MethodPost, base+"s", strings.NewReader("late"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err = srv.Client().Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	a := <-longPoll
	require.NoError(t, a.err, "the long-poll")
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, "late", a.body)
	got := ""
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && !strings.HasPrefix(d, "{") {
			got = d
			break
		}
	}
	require.NoError(t, sc.Err(), "the SSE answer")
	assert.Equal(t, "late", got)
}

// Over HTTP/2 an append whose body never finishes is answered 408
// request_timeout on its stream, as over HTTP/1, and the connection goes
// on serving — also when the server's body bound is longer than the
// handler's WriteTimeout (the example server's are equal). The handler
// armed its write deadline when the request came in, and HTTP/2 resets a
// stream when its write deadline passes, even mid-upload: the client saw
// INTERNAL_ERROR, no answer (found over h2c against the example server).
func TestHTTP2BodyThatNeverEndsIs408(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	defer func() { _ = bus.Close() }()
	h, err := durable.NewHandler(bus, durable.HandlerOptions{WriteTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer func() { _ = h.Close() }()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(300 * time.Millisecond)) // a server's body bound
		h.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	client := ts.Client()
	req, err := http.NewRequest(http.MethodPut, ts.URL+durable.Pattern+"s", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("ab")) }()
	req, err = http.NewRequest(http.MethodPost, ts.URL+durable.Pattern+"s", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err = client.Do(req)
	require.NoError(t, err, "an answer, not a reset stream")
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, [2]any{"HTTP/2.0", http.StatusRequestTimeout}, [2]any{resp.Proto, resp.StatusCode}, "%s", b)
	assert.Contains(t, string(b), "request_timeout")

	resp, err = client.Get(ts.URL + durable.Pattern + "s?offset=-1")
	require.NoError(t, err, "the connection serves the next request")
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
