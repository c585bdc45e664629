package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// TestClientResumesAcrossCuts: the Go client resumes across four
// server-side cuts with its resume message and sees every id exactly once,
// in order; the session's close ends it with ErrSessionClosed.
func TestClientResumesAcrossCuts(t *testing.T) {
	s, cut := newCutServer(t, eventbus.Options{ReplayBufferSize: 10_000}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &ws.Client{Retry: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	st := cl.Subscribe(ctx, s.url("s1", ""), ws.StreamOptions{})
	defer st.Close()

	const total = 400
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range total {
			_, err := s.bus.Publish("s1", "msg", i)
			assert.NoError(t, err)
			if i%100 == 50 {
				// Cut only once the client is connected again after the
				// previous cut (its (i/100+1)-th handshake succeeded): a
				// cut that lands while it is still reconnecting cuts
				// nothing, and the four resumes would then hang on how
				// fast a loaded machine reconnects. The 30 s is a hang
				// guard; a client that does not resume fails here.
				for k := i/100 + 1; st.Connects() < k; time.Sleep(time.Millisecond) {
					if ctx.Err() != nil {
						assert.Fail(t, "the client did not reconnect", "before cut %d: %d handshakes", k, st.Connects())
						break
					}
				}
				cut.Cut()
			}
			time.Sleep(200 * time.Microsecond)
		}
		assert.NoError(t, s.bus.CloseSession("s1"))
	}()
	var ids []uint64
	var err error
	for {
		var ev eventbus.Event
		ev, err = st.Next()
		if err != nil {
			break
		}
		if ev.ID != 0 {
			ids = append(ids, ev.ID)
		}
	}
	wg.Wait()
	require.ErrorIs(t, err, eventbus.ErrSessionClosed)
	require.Len(t, ids, total+1, "every event and session_closed")
	for i, id := range ids {
		require.EqualValues(t, i+1, id, "ids exactly once, in order")
	}
	assert.GreaterOrEqual(t, st.Connects(), 5, "four cuts, four resumes")
	assert.Zero(t, s.bus.Stats().Guarded)
}

// TestClientStopsOn4xx: a 404 answer stops the stream with a StatusError.
func TestClientStopsOn4xx(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	st := ws.Subscribe(context.Background(), s.url("nope", ""), ws.StreamOptions{})
	defer st.Close()
	_, err := st.Next()
	var se *ws.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, 404, se.Status)
	assert.ErrorIs(t, err, eventbus.ErrSessionNotFound)
}

// TestClientRetries429: a 429 at the subscriber cap is retried (Retry-After
// is the floor of the wait), as by the SSE client; the stream connects once
// the slot is free.
func TestClientRetries429(t *testing.T) {
	s := newServer(t, eventbus.Options{MaxSubscribers: 1}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	hold, err := s.bus.Subscribe(context.Background(), "s1", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	publish(t, s.bus, "s1", 1)
	st := (&ws.Client{Retry: 10 * time.Millisecond}).Subscribe(context.Background(), s.url("s1", ""), ws.StreamOptions{})
	defer st.Close()
	got := make(chan eventbus.Event, 1)
	go func() {
		ev, err := st.Next()
		assert.NoError(t, err)
		got <- ev
	}()
	require.Eventually(t, func() bool { return s.h.Stats().Rejected >= 1 }, waitFor, time.Millisecond, "refused with 429 first")
	hold.Close()
	select {
	case ev := <-got:
		assert.EqualValues(t, 1, ev.ID)
	case <-time.After(waitFor):
		t.Fatal("the stream did not connect after the slot was freed")
	}
}

// TestClientAcrossRestart: the server's bus is replaced (a restart: new
// epoch, ids from 1 again) and the old handler closes with 1001; the client
// resumes with the old cursor and its epoch, gets
// state_resync_required{epoch_reset}, then exactly the new server's events.
func TestClientAcrossRestart(t *testing.T) {
	type incarnation struct {
		bus *eventbus.Bus
		h   *ws.Handler
	}
	start := func() *incarnation {
		bus, err := eventbus.New(eventbus.Options{})
		require.NoError(t, err)
		require.NoError(t, bus.CreateSession("s1", ""))
		h, err := ws.NewHandler(bus, ws.HandlerOptions{})
		require.NoError(t, err)
		return &incarnation{bus, h}
	}
	stop := func(x *incarnation) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		assert.NoError(t, x.h.Shutdown(ctx))
		_ = x.bus.Close()
	}
	var cur atomic.Pointer[incarnation]
	a := start()
	cur.Store(a)
	mux := http.NewServeMux()
	mux.HandleFunc(ws.Pattern, func(w http.ResponseWriter, r *http.Request) { cur.Load().h.ServeHTTP(w, r) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	publish(t, a.bus, "s1", 3)
	st := (&ws.Client{Retry: 10 * time.Millisecond}).Subscribe(context.Background(),
		"ws"+strings.TrimPrefix(srv.URL, "http")+"/session/s1/ws", ws.StreamOptions{})
	defer st.Close()
	for want := uint64(1); want <= 3; want++ {
		ev, err := st.Next()
		require.NoError(t, err)
		require.Equal(t, want, ev.ID)
	}
	assert.Equal(t, a.bus.Epoch(), st.Epoch())

	b := start()
	defer stop(b)
	publish(t, b.bus, "s1", 2)
	cur.Store(b)
	stop(a) // 1001 to the client

	ev, err := st.Next()
	require.NoError(t, err)
	require.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	var d frame.ResyncData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	assert.Equal(t, frame.ReasonEpochReset, d.Reason)
	assert.EqualValues(t, 3, d.LastDeliveredID, "the old server's cursor")
	for want := uint64(1); want <= 2; want++ {
		ev, err := st.Next()
		require.NoError(t, err)
		require.Equal(t, want, ev.ID, "the new server's ids, from 1")
	}
	assert.Equal(t, b.bus.Epoch(), st.Epoch())
	assert.Equal(t, 2, st.Connects())
}
