package ws_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStalledSocketEvicted: a raw socket that never reads and one that reads
// only after its eviction, each with maxQueued=16, beside a healthy client.
// Both are evicted once their 16 frames are queued behind the stalled
// writes; the late reader finds client_evicted and the close 1008 "slow
// consumer" on the wire; the one that never reads is cut at the end of the
// close grace; the healthy client receives every event meanwhile; and
// publishing 20 MB more afterwards does not grow the heap (nothing is held
// for the evicted sockets).
func TestStalledSocketEvicted(t *testing.T) {
	const grace = 1500 * time.Millisecond
	var mu sync.Mutex
	evictedAt := map[uint64]time.Time{}
	names := map[string]uint64{} // ?who= → subscriber id
	evictions := evictionHandler(func(subscriber uint64) {
		mu.Lock()
		evictedAt[subscriber] = time.Now()
		mu.Unlock()
	})
	s, cl := newCutServer(t, eventbus.Options{ReplayBufferSize: 64, Diagnostics: slog.New(evictions)}, ws.HandlerOptions{
		ResumeWait: -1, CloseGrace: grace,
		OnSubscribe: func(r *http.Request, sub *eventbus.Subscription) {
			mu.Lock()
			names[r.URL.Query().Get("who")] = sub.ID()
			mu.Unlock()
		},
	})
	cl.mu.Lock()
	cl.small = true
	cl.mu.Unlock()
	require.NoError(t, s.bus.CreateSession("s1", ""))

	// The healthy client reads everything.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	healthy := ws.Subscribe(ctx, s.url("s1", "who=healthy&replay=0"), ws.StreamOptions{})
	defer healthy.Close()
	var got atomic.Uint64
	var healthyErr error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var last uint64
		for {
			ev, err := healthy.Next()
			if err != nil {
				healthyErr = err
				return
			}
			if ev.ID != 0 {
				if ev.ID != last+1 && last != 0 {
					healthyErr = errors.New("gap in the healthy client's ids")
					return
				}
				last = ev.ID
				got.Store(last)
			}
		}
	}()
	stalled := dialRaw(t, s.url("s1", "who=stalled&replay=0&maxQueued=16")) // a raw socket: never reads
	late := dialSmall(t, s.url("s1", "who=late&replay=0&maxQueued=16"))
	require.Eventually(t, func() bool { return s.h.Stats().Active == 3 }, waitFor, time.Millisecond)

	payload := map[string]string{"text": strings.Repeat("x", 1024)}
	pub := func(n int) {
		for i := range n {
			ev, err := s.bus.Publish("s1", "chunk", payload)
			require.NoError(t, err)
			if i%32 == 31 { // the healthy reader keeps up: it has read everything so far
				require.Eventually(t, func() bool { return got.Load() >= ev.ID }, waitFor, 100*time.Microsecond,
					"the healthy client fell behind: %v", healthyErr)
			}
		}
	}
	evicted := func(who string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := evictedAt[names[who]]
		return at, ok
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pub(64)
		_, a := evicted("stalled")
		_, b := evicted("late")
		if a && b {
			break
		}
		require.True(t, time.Now().Before(deadline), "the stalled sockets were not evicted")
	}
	lateAt, _ := evicted("late")
	stalledAt, _ := evicted("stalled")
	_, healthyEvicted := evicted("healthy")
	require.False(t, healthyEvicted)

	// The late reader reads now, within the grace: whatever was in the
	// socket buffers, then client_evicted, then 1008 "slow consumer".
	ce, evs := readClose(t, late)
	assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	assert.Equal(t, ws.ReasonSlowConsumer, ce.Reason)
	require.NotEmpty(t, evs)
	assert.Equal(t, frame.TypeClientEvicted, evs[len(evs)-1].Type)
	var want uint64
	require.Equal(t, resume.TypeStreamStart, evs[0].Type, "a live-only stream opens with where it starts")
	for _, e := range evs[1 : len(evs)-1] {
		if e.ID == 0 {
			assert.Equal(t, frame.TypeSlowClientWarning, e.Type)
			continue
		}
		want++
		assert.Equal(t, want, e.ID, "what the socket buffers held, in order; the rest was skipped")
	}
	assert.Less(t, time.Since(lateAt), grace+time.Second)

	// The socket that never reads is cut at the end of the grace: only the
	// healthy connection is left, and the raw socket, read now, holds the
	// frames that fitted in the buffers and then ends (no close frame could
	// reach it).
	require.Eventually(t, func() bool { return s.h.Stats().Active == 1 }, grace+5*time.Second, 5*time.Millisecond)
	assert.Less(t, time.Since(stalledAt), grace+5*time.Second)
	require.NoError(t, stalled.SetReadDeadline(time.Now().Add(waitFor)))
	rest, err := io.ReadAll(stalled)
	if err != nil {
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the server cut the socket")
	}
	assert.NotEmpty(t, rest, "the frames that fitted in the socket buffers")
	assert.EqualValues(t, 2, s.h.Stats().Evicted)

	// The healthy client received everything published meanwhile.
	last := s.bus.LastEventID()
	require.Eventually(t, func() bool { return got.Load() == last }, waitFor, time.Millisecond,
		"the healthy client keeps receiving (got %d of %d)", got.Load(), last)
	healthy.Close()
	<-readerDone
	assert.ErrorIs(t, healthyErr, resume.ErrStreamClosed)

	// Memory: 20,000 more 1 KiB events (20 MB); the evicted sockets hold
	// nothing, the ring holds 64.
	before := heapAlloc()
	for range 20_000 {
		_, err := s.bus.Publish("s1", "chunk", payload)
		require.NoError(t, err)
	}
	after := heapAlloc()
	assert.Less(t, int64(after)-int64(before), int64(8<<20), "heap grew from %d to %d", before, after)
	t.Logf("both evicted within %d events; the late reader got %d frames then 1008; the healthy client got all %d; heap %d → %d bytes",
		last, len(evs), last, before, after)
}

// evictionHandler is a slog.Handler for Options.Diagnostics that calls its
// function with the subscriber of every client_evicted record.
type evictionHandler func(subscriber uint64)

func (h evictionHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h evictionHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h evictionHandler) WithGroup(string) slog.Handler            { return h }
func (h evictionHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "eventbus: client_evicted" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "subscriber" {
			h(a.Value.Uint64())
		}
		return true
	})
	return nil
}
