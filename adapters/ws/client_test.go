package ws_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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

// TestClientRefusesMalformedStartCursor: a StreamOptions.LastEventID or
// Epoch that is not a cursor or epoch stops the stream before any
// connection, with an error naming the value, as the SSE client does.
func TestClientRefusesMalformedStartCursor(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	for _, o := range []ws.StreamOptions{{LastEventID: "-5"}, {LastEventID: "5", Epoch: "E\r"}} {
		st := (&ws.Client{Retry: time.Millisecond}).Subscribe(context.Background(), s.url("s1", ""), o)
		_, err := st.Next()
		st.Close()
		var pe *resume.PermanentError
		assert.False(t, errors.As(err, &pe), "%+v: the error itself, not its wrapper", o)
		bad := o.LastEventID
		if o.Epoch != "" {
			bad = o.Epoch
		}
		require.Error(t, err, "%+v", o)
		assert.Contains(t, err.Error(), strconv.Quote(bad), "%+v", o)
		assert.Zero(t, st.Connects(), "%+v", o)
	}
	assert.Zero(t, s.h.Stats().Started, "nothing connected")
}

// TestClientRefusesHeaderItCannotSend: a Client.Header no HTTP client can
// send stops the stream before any connection with an error naming it; it
// was retried forever as a network error. A URL without a scheme is named
// too.
func TestClientRefusesHeaderItCannotSend(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	for _, hd := range []http.Header{{"Authorization": {"Bearer x\n"}}, {"Bad Name": {"v"}}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st := (&ws.Client{Header: hd, Retry: time.Millisecond}).Subscribe(ctx, s.url("s1", ""), ws.StreamOptions{})
		_, err := st.Next()
		cancel()
		require.Error(t, err, "%v", hd)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%v: stopped at once, not retried", hd)
		for k := range hd {
			assert.Contains(t, err.Error(), k, "%v", hd)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := (&ws.Client{Retry: time.Millisecond}).Subscribe(ctx, "localhost:8080/session/s1/ws", ws.StreamOptions{})
	_, err := st.Next()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"localhost"`)
	assert.Zero(t, s.h.Stats().Started, "nothing connected")
}
