package sse_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// cutter ends, on demand, the streams of the requests whose ?client= it
// is told: a server-side drop that the client resumes from.
type cutter struct {
	mu      sync.Mutex
	cancels map[string][]context.CancelFunc
}

func (c *cutter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c.mu.Lock()
		if c.cancels == nil {
			c.cancels = map[string][]context.CancelFunc{}
		}
		id := r.URL.Query().Get("client")
		c.cancels[id] = append(c.cancels[id], cancel)
		c.mu.Unlock()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (c *cutter) cut(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels[client] {
		cancel()
	}
	c.cancels[client] = nil
}

// turnServer mounts the SSE handler (behind mw) and the turn routes.
func turnServer(t testing.TB, b *eventbus.Bus, mw func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	h := newHandler(t, b, sse.HandlerOptions{Retry: 10 * time.Millisecond})
	th, err := turns.NewHandler(b, turns.HandlerOptions{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	var hh http.Handler = h
	if mw != nil {
		hh = mw(h)
	}
	mux.Handle(sse.Pattern, hh)
	mux.Handle(turns.CancelPattern, th.Cancel())
	mux.Handle(turns.PresencePattern, th.Presence())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	return srv
}

// nextOfType reads s until an event of type typ and returns it with the
// presence frames read on the way.
func nextOfType(t testing.TB, s *sse.Stream, typ string) (eventbus.Event, []frame.PresenceData) {
	t.Helper()
	var ps []frame.PresenceData
	for {
		ev, err := s.Next()
		require.NoError(t, err)
		if ev.Type == frame.TypePresence {
			var p frame.PresenceData
			require.NoError(t, json.Unmarshal(ev.Data, &p))
			ps = append(ps, p)
		}
		if ev.Type == typ {
			return ev, ps
		}
	}
}

// Over SSE, ?client=&presence=1 (sse.StreamOptions Client and Presence)
// attach a client and bring presence frames, a snapshot first; a client
// whose stream drops and resumes within the grace shows neither a leave
// nor a join to the others, and is counted throughout.
func TestPresenceOverSSEReconnectWithinGraceShowsNoLeaveOrJoin(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	b := newBus(t, eventbus.Options{PresenceGrace: grace})
	require.NoError(t, b.CreateSession("s", ""))
	cut := &cutter{}
	srv := turnServer(t, b, cut.wrap)
	url := srv.URL + "/session/s/events?replay=0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	watcher := sse.Subscribe(ctx, url, sse.StreamOptions{Client: "watcher", Presence: true})
	defer watcher.Close()
	first, err := watcher.Next()
	require.NoError(t, err)
	require.Equal(t, frame.TypePresence, first.Type, "the presence snapshot comes first")
	p, ok := watcher.Presence()
	require.True(t, ok)
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 1, Status: "idle"}, p)

	tab := sse.Subscribe(ctx, url, sse.StreamOptions{Client: "tab-1", Presence: true})
	defer tab.Close()
	_, err = tab.Next()
	require.NoError(t, err)
	_, ps := nextOfType(t, watcher, frame.TypePresence)
	assert.Equal(t, []string{"tab-1"}, ps[len(ps)-1].Joined)
	assert.Equal(t, 2, ps[len(ps)-1].Clients)

	// tab-1's stream drops; it resumes by itself (Retry 10 ms) within the
	// grace.
	cut.cut("tab-1")
	go func() {
		for {
			if _, err := tab.Next(); err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return tab.Connects() == 2 }, 20*time.Second, time.Millisecond)
	time.Sleep(grace + 500*time.Millisecond) // the grace a leave would wait for has passed
	_, err = b.Publish("s", "marker", nil)
	require.NoError(t, err)
	_, ps = nextOfType(t, watcher, "marker")
	for _, p := range ps {
		assert.Empty(t, p.Left, "no leave: %+v", p)
		assert.Empty(t, p.Joined, "no join: %+v", p)
		assert.Equal(t, 2, p.Clients, "tab-1 counted throughout: %+v", p)
	}
	now, err := b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, 2, now.Clients)

	// The watcher's view of the same over the route.
	a, err := http.Get(srv.URL + "/session/s/presence")
	require.NoError(t, err)
	defer a.Body.Close()
	var got frame.PresenceData
	require.NoError(t, json.NewDecoder(a.Body).Decode(&got))
	assert.Equal(t, 2, got.Clients)
}

// A stream without ?presence=1 gets no presence frame: the frame sequence
// of an existing client does not change.
func TestNoPresenceFramesUnlessAsked(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s", ""))
	srv := turnServer(t, b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := sse.Subscribe(ctx, srv.URL+"/session/s/events", sse.StreamOptions{Client: "tab-1"})
	defer s.Close()
	require.NoError(t, b.SetStatus("s", "thinking"))
	_, err := b.Publish("s", "marker", nil)
	require.NoError(t, err)
	ev, err := s.Next()
	require.NoError(t, err)
	assert.Equal(t, "marker", ev.Type)
	_, ok := s.Presence()
	assert.False(t, ok)
	p, err := b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, 1, p.Clients, "attached as tab-1 all the same")
}

// The subscribe request refuses a bad client id or presence value, naming
// it.
func TestPresenceParametersRefusals(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	require.NoError(t, b.CreateSession("s", ""))
	srv := turnServer(t, b, nil)
	for q, want := range map[string][2]string{
		"client=":           {resume.CodeInvalidClient, "invalid client: empty client id"},
		"client=a%0Ab":      {resume.CodeInvalidClient, `client id "a\nb" contains control character`},
		"presence=yes":      {resume.CodeInvalidPresence, `invalid presence "yes" (want 0 or 1)`},
		"client=a&client=b": {resume.CodeInvalidQuery, "client given 2 times"},
		"presense=1":        {resume.CodeUnknownParameter, "did you mean presence?"},
	} {
		resp, err := http.Get(srv.URL + "/session/s/events?" + q)
		require.NoError(t, err)
		se := resume.ReadStatusError(resp).(*resume.StatusError)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, se.Status, q)
		assert.Equal(t, want[0], se.Code, q)
		assert.Contains(t, se.Message, want[1], q)
	}
	assert.Zero(t, b.Stats().Subscribers)
}
