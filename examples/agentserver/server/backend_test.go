package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
)

// cutOffBackend is a backend whose node is cut off: its feed works (the
// session exists), but it cannot say how far its history goes, so a
// subscribe with a cursor ahead of the node fails with eventbus.ErrBackend.
type cutOffBackend struct{ feed backend.Feed }

func (c *cutOffBackend) Epoch() string { return "cut" }
func (c *cutOffBackend) Append(context.Context, []string, backend.Record) (uint64, error) {
	return 0, errors.New("nats: connection closed")
}
func (c *cutOffBackend) Start(_ context.Context, feed backend.Feed) error { c.feed = feed; return nil }
func (c *cutOffBackend) Close() error                                     { return nil }
func (c *cutOffBackend) LastID(context.Context) (uint64, error) {
	return 0, errors.New("nats: timeout")
}

// Issue 27.6: a bus whose backend fails (eventbus.ErrBackend) made the SSE
// and WebSocket routes answer 500 internal_error, where the publish route
// and /healthz say 503 with Retry-After: a client that retries on 503
// gave up. Both now answer 503 unavailable with Retry-After, and a
// WebSocket resume message that meets it is closed with 1013 (try again
// later), which every client resumes.
func TestBackendFailureIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	be := &cutOffBackend{}
	bus, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, be)
	require.NoError(t, err)
	defer bus.Close()
	be.feed.Ingest([]string{"s1"}, backend.Record{ID: 1, Type: "_replaybus.session_created", Time: time.Now()})
	require.True(t, bus.SessionExists("s1"))
	s, err := New(bus, Options{})
	require.NoError(t, err)
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()

	// A cursor ahead of this node: the bus must ask the backend, which
	// cannot answer.
	for _, path := range []string{"/session/s1/events", "/session/s1/ws"} {
		t.Run(path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Last-Event-ID", "cut-5")
			if strings.HasSuffix(path, "/ws") {
				for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
					"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Contains(t, string(body), `"code":"unavailable"`)
		})
	}

	t.Run("ws resume message", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/session/s1/ws", nil)
		require.NoError(t, err)
		defer c.CloseNow()
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"resume":{"lastEventId":"5","epoch":"cut"}}`)))
		for {
			_, _, err := c.Read(ctx)
			if err != nil {
				assert.Equal(t, websocket.StatusTryAgainLater, websocket.CloseStatus(err), "%v", err)
				return
			}
		}
	})
}
