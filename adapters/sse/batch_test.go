package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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

// flushSizes is a recorder that records how many bytes each flush sent.
type flushSizes struct {
	*recorder
	mu    sync.Mutex
	sent  int
	sizes []int
}

func (f *flushSizes) Flush() {
	n := len(f.body())
	f.mu.Lock()
	f.sizes = append(f.sizes, n-f.sent)
	f.sent = n
	f.mu.Unlock()
}

// A batch of large frames is flushed every 64 KiB: a frame that takes the
// written bytes past the bound is the last before a flush, and the frames
// already taken follow in the next flush, none lost or repeated.
func TestHandlerFlushesLargeBatchesEvery64KiB(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 100})
	big := strings.Repeat("x", 20<<10)
	for range 12 {
		publish(t, b, "s1", "tick", big)
	}
	h := newHandler(t, b, sse.HandlerOptions{Heartbeat: -1})
	w := &flushSizes{recorder: newRecorder()}
	r := httptest.NewRequest(http.MethodGet, "/session/s1/events?last_event_id=0", nil)
	r.SetPathValue("id", "s1")
	ctx, cancel := context.WithCancel(r.Context())
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(w, r.WithContext(ctx)) }()
	require.Eventually(t, func() bool { return len(frames(t, w.body())) == 13 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done

	assert.Equal(t, seq(1, 12), ids(frames(t, w.body())))
	w.mu.Lock()
	defer w.mu.Unlock()
	const frameMax = 21 << 10 // a frame of 20 KiB of payload with its envelope and fields
	big3 := 0
	for _, n := range w.sizes {
		assert.Less(t, n, 64<<10+frameMax, "a flush of %d bytes: past the 64 KiB bound by more than one frame", n)
		if n > 3*(20<<10) {
			big3++
		}
	}
	// 12 frames of 20 KiB: four per flush (three stay under 64 KiB), so
	// the replay goes in three flushes of more than three frames' worth;
	// at least two of them whatever the envelope's size.
	assert.GreaterOrEqual(t, big3, 2, "flush sizes %v", w.sizes)
}
