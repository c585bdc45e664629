package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// flushCounter is a recorder that counts flushes and the frames written
// before each.
type flushCounter struct {
	*recorder
	mu      sync.Mutex
	flushes int
}

func (f *flushCounter) Flush() {
	f.mu.Lock()
	f.flushes++
	f.mu.Unlock()
}

// Frames that are ready together are written as one batch and flushed once
// (flush once per batch of ready frames, not per frame): a resume
// of 200 events reaches the client in a handful of flushes, every frame
// intact and in order, and streams of one handler get the same bytes.
func TestHandlerFlushesOncePerBatch(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 500})
	for range 200 {
		publish(t, b, "s1", "tick", map[string]int{"n": 1})
	}
	h := newHandler(t, b, sse.HandlerOptions{Heartbeat: -1})

	run := func() (*flushCounter, func()) {
		w := &flushCounter{recorder: newRecorder()}
		r := httptest.NewRequest(http.MethodGet, "/session/s1/events?last_event_id=0", nil)
		r.SetPathValue("id", "s1")
		ctx, cancel := context.WithCancel(r.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, r.WithContext(ctx)) }()
		// Every frame, replay_complete included: cancelled as soon as the
		// 200th id is written, the stream's end discards a replay_complete
		// not yet taken, and the counters below are one short.
		require.Eventually(t, func() bool { return len(frames(t, w.body())) == 201 }, 5*time.Second, time.Millisecond)
		return w, func() { cancel(); <-done }
	}
	w1, stop1 := run()
	w2, stop2 := run()
	stop1()
	stop2()

	assert.Equal(t, seq(1, 200), ids(frames(t, w1.body())))
	assert.Equal(t, w1.body(), w2.body(), "every stream writes the same frames")
	w1.mu.Lock()
	flushes := w1.flushes
	w1.mu.Unlock()
	// retry line + ≥ 202 frames (replay, replay_complete) in batches of at
	// most 64: at least 5 flushes, far fewer than one per frame.
	assert.GreaterOrEqual(t, flushes, 4)
	assert.Less(t, flushes, 20, "frames were flushed one by one")
	st := h.Stats()
	assert.Equal(t, uint64(2*201), st.Frames, "per-stream counters add up: 200 events + replay_complete per stream")
}
