package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

func TestHandlerHeartbeat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{Epoch: "E1"})
		publish(t, b, "s1", "a", nil)
		h := newHandler(t, b, sse.HandlerOptions{PlainIDs: true}) // 15 s default
		w := newRecorder()
		ctx, cancel := context.WithCancel(t.Context())
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/session/s1/events?replay=0", nil)
		r.SetPathValue("id", "s1")
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, r) }()

		count := func() int { return strings.Count(w.body(), ": heartbeat\n\n") }
		synctest.Wait()
		assert.Equal(t, "retry: 3000\n\nid: 1\nevent: stream_start\ndata: {\"v\":1,\"type\":\"stream_start\",\"session\":\"s1\",\"data\":{\"lastEventId\":\"1\",\"epoch\":\"E1\"}}\n\n", w.body(), "the retry line, then the stream_start frame of a live-only stream")

		time.Sleep(15*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Zero(t, count(), "not before 15 s of silence")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 1, count())

		time.Sleep(5 * time.Second) // t=20s: a frame resets the silence
		publish(t, b, "s1", "b", nil)
		synctest.Wait()
		time.Sleep(15*time.Second - time.Nanosecond) // t=35s-1ns
		synctest.Wait()
		assert.Equal(t, 1, count(), "silence is counted from the last frame")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 2, count())

		time.Sleep(45 * time.Second)
		synctest.Wait()
		assert.Equal(t, 5, count())
		assert.EqualValues(t, 5, h.Stats().Heartbeats)
		assert.EqualValues(t, 1, h.Stats().Frames)

		cancel()
		<-done
		assert.True(t, strings.HasPrefix(w.body(), "retry: 3000\n\nid: 1\nevent: stream_start\ndata: {\"v\":1,\"type\":\"stream_start\",\"session\":\"s1\",\"data\":{\"lastEventId\":\"1\",\"epoch\":\"E1\"}}\n\n: heartbeat\n\nid: 2\n"), w.body())
	})
}

func TestHandlerHeartbeatOptions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBus(t, eventbus.Options{Epoch: "E1"})
		publish(t, b, "s1", "a", nil)
		h := newHandler(t, b, sse.HandlerOptions{Heartbeat: time.Second, Retry: -1, PlainIDs: true})
		w := newRecorder()
		ctx, cancel := context.WithCancel(t.Context())
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/session/s1/events?replay=0", nil)
		r.SetPathValue("id", "s1")
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, r) }()
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, "id: 1\nevent: stream_start\ndata: {\"v\":1,\"type\":\"stream_start\",\"session\":\"s1\",\"data\":{\"lastEventId\":\"1\",\"epoch\":\"E1\"}}\n\n: heartbeat\n\n: heartbeat\n\n: heartbeat\n\n", w.body(), "no retry line, the stream_start frame, 1 s heartbeats")
		require.Equal(t, http.StatusOK, w.code())
		cancel()
		<-done
	})
}
