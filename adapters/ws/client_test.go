package ws_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// TestClientResumesAcrossCuts: the Go client resumes across four
// server-side cuts with its resume message and sees every id exactly once,
// in order; the session's close ends it with ErrSessionClosed.
func TestClientResumesAcrossCuts(t *testing.T) {
	s, cut := newCutServer(t, config.Config{ReplayBufferSize: 10_000}, ws.HandlerOptions{})
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
	s := newServer(t, config.Config{}, ws.HandlerOptions{})
	st := ws.Subscribe(context.Background(), s.url("nope", ""), ws.StreamOptions{})
	defer st.Close()
	_, err := st.Next()
	var se *ws.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, 404, se.Status)
	assert.ErrorIs(t, err, eventbus.ErrSessionNotFound)
}
