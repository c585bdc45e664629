package durable_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// busy publishes n events into session from another route (Go) and returns
// the offset after the last one: the stream's tail.
func busy(t *testing.T, r *rig, session string, n int) string {
	t.Helper()
	var last eventbus.Event
	for i := range n {
		var err error
		last, err = r.bus.Publish(session, "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}
	return durable.FormatOffset(eventbus.Position{ID: last.ID, Epoch: r.bus.Epoch()})
}

// The tail of a stream is the bus's newest id of its session, however many
// events other routes published since the handler last looked (more than
// its replay buffer holds): HEAD, ?offset=now (catch-up, long-poll, SSE), a
// PUT that finds the stream (or a session of another route) there, a fork
// at the source's tail and a subscription's link answer it, never 410.
func TestTheTailOfABusySessionIsItsNewestID(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  bool // created by a PUT (else a session of another route)
	}{{"put", true}, {"other route's session", false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{Subscriptions: true, LongPollTimeout: 30 * time.Second})
			defer r.h.Close()
			ct := []string{"Content-Type", "application/json"}
			if tc.put {
				resp, _ := r.do(t, http.MethodPut, "busy", "", ct...)
				require.Equal(t, http.StatusCreated, resp.StatusCode)
			} else {
				require.NoError(t, r.bus.CreateSession("busy", ""))
			}
			resp, _ := r.do(t, http.MethodHead, "busy", "")
			require.Equal(t, http.StatusOK, resp.StatusCode, "the handler has seen the stream")
			tail := busy(t, r, "busy", 150) // the replay buffer holds 100

			resp, _ = r.do(t, http.MethodHead, "busy", "")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "HEAD")
			assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"), "HEAD")

			resp, body := r.do(t, http.MethodGet, "busy?offset=now", "")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "now: %s", body)
			assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"), "now")

			tail = busy(t, r, "busy", 150)
			res, err := http.Get(r.url + "busy?offset=now&live=sse")
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, res.StatusCode, "now, SSE")
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				if c, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
					var ctl struct{ StreamNextOffset string }
					require.NoError(t, json.Unmarshal([]byte(c), &ctl))
					assert.Equal(t, tail, ctl.StreamNextOffset, "now, SSE: the first control event is at the tail")
					break
				}
			}
			_ = res.Body.Close()
			require.Eventually(t, func() bool { return testkit.SubscriberCounts(r.bus)["busy"] == 0 }, 10*time.Second, time.Millisecond,
				"the SSE reader is gone")

			busy(t, r, "busy", 150)
			done := make(chan *http.Response, 1)
			go func() {
				resp, _ := r.do(t, http.MethodGet, "busy?offset=now&live=long-poll", "")
				done <- resp
			}()
			require.Eventually(t, func() bool { return testkit.SubscriberCounts(r.bus)["busy"] == 1 }, 10*time.Second, time.Millisecond,
				"the long-poll waits at the tail")
			next := busy(t, r, "busy", 1)
			resp = <-done
			assert.Equal(t, http.StatusOK, resp.StatusCode, "now, long-poll")
			assert.Equal(t, next, resp.Header.Get("Stream-Next-Offset"), "now, long-poll: the one event after the tail")
			tail = next

			resp, _ = r.do(t, http.MethodPut, "busy", "", ct...)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "PUT again")
			assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"), "PUT again")

			resp, body = r.do(t, http.MethodPut, "fork", "", "Content-Type", "application/json", "Stream-Forked-From", "/v1/stream/busy")
			require.Equal(t, http.StatusCreated, resp.StatusCode, "a fork at the source's tail: %s", body)
			assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"), "fork")

			resp, body = r.do(t, http.MethodPut, "__ds/subscriptions/s1", `{"type":"pull-wake","streams":["busy"],"wake_stream":"fork"}`, ct...)
			require.Equal(t, http.StatusCreated, resp.StatusCode, body)
			assert.Contains(t, body, `"acked_offset":"`+tail+`"`, "a link starts at the tail")
		})
	}
}

// A PUT of a session another route filled serves it with its history and
// answers its tail.
func TestPutOfABusySessionAnswersItsTail(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	tail := busy(t, r, "existing", 150)
	resp, _ := r.do(t, http.MethodPut, "existing", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"))
}

// The closing note's figure: HEAD on a session of 100,000 events published
// by another route answers 200 with the tail at once — the handler asks
// the bus for the session's newest id and walks no history.
func TestHeadOnAHundredThousandEvents(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	resp, _ := r.do(t, http.MethodPut, "big", "", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	tail := busy(t, r, "big", 100_000)
	start := time.Now()
	resp, _ = r.do(t, http.MethodHead, "big", "")
	took := time.Since(start)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"))
	t.Logf("HEAD after 100,000 events: %d, Stream-Next-Offset %s, in %v", resp.StatusCode, resp.Header.Get("Stream-Next-Offset"), took)
}
