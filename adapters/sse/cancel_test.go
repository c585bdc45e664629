package sse_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Stream.Cancel posts to the session's cancel route (the stream URL's
// /events → /cancel), and the stream then reads the turn's end.
func TestClientCancelPostsToTheCancelRoute(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s", ""))
	srv := turnServer(t, b, nil)
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := sse.Subscribe(ctx, srv.URL+"/session/s/events?scope=descendants", sse.StreamOptions{})
	defer s.Close()
	start, _ := nextOfType(t, s, frame.TypeTurnStart)
	assert.JSONEq(t, `{"turn":"t1","session":"s"}`, string(start.Data))

	res, err := s.Cancel(ctx, resume.CancelRequest{Turn: "t1"})
	require.NoError(t, err)
	assert.Equal(t, eventbus.CancelResult{Cancelled: []string{"t1"}, Held: []string{}}, res)
	<-tr.Context().Done()
	end, _ := nextOfType(t, s, frame.TypeTurnEnd)
	assert.JSONEq(t, `{"turn":"t1","reason":"cancelled"}`, string(end.Data))

	// The same turn again: the route's 409, as an error that names it.
	_, err = s.Cancel(ctx, resume.CancelRequest{Turn: "t1"})
	var se *resume.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusConflict, se.Status)
	assert.ErrorIs(t, err, eventbus.ErrTurnEnded)
	assert.Contains(t, se.Message, `turn "t1"`)
}

// Client.CancelURL chooses the route; without it, a stream URL that does
// not end in /events cannot be mapped, and Cancel says so.
func TestClientCancelURL(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s", ""))
	srv := turnServer(t, b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s := sse.Subscribe(ctx, srv.URL+"/stream/s", sse.StreamOptions{})
	defer s.Close()
	_, err := s.Cancel(ctx, resume.CancelRequest{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `stream URL "`+srv.URL+`/stream/s" does not end in /events: set Client.CancelURL`)

	var asked string
	c := &sse.Client{CancelURL: func(u string) string {
		asked = u
		return strings.Replace(u, "/stream/s", "/session/s/cancel", 1)
	}}
	s2 := c.Subscribe(ctx, srv.URL+"/stream/s", sse.StreamOptions{})
	defer s2.Close()
	res, err := s2.Cancel(ctx, resume.CancelRequest{Turn: "later"})
	require.NoError(t, err)
	assert.Equal(t, []string{"later"}, res.Held)
	assert.Equal(t, srv.URL+"/stream/s", asked)

	// An unknown session: 404, errors.Is ErrSessionNotFound.
	s3 := sse.Subscribe(ctx, srv.URL+"/session/nobody/events", sse.StreamOptions{})
	defer s3.Close()
	_, err = s3.Cancel(ctx, resume.CancelRequest{})
	assert.ErrorIs(t, err, eventbus.ErrSessionNotFound)
}
