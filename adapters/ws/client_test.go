package ws_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// TestClientStopsOn4xx: a 404 answer stops the stream with a StatusError.
func TestClientStopsOn4xx(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	st := ws.Subscribe(context.Background(), s.url("nope", ""), ws.StreamOptions{})
	defer st.Close()
	_, err := st.Next()
	var se *resume.StatusError
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
