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
	require.Eventually(t, func() bool { return bus.SubscriberCounts()["s"] == 2 }, 10*time.Second, time.Millisecond)

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
