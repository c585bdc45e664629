package turns_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newBus(t testing.TB) *eventbus.Bus {
	t.Helper()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// serve mounts a Handler made with o on the three patterns of a ServeMux
// behind an httptest.Server.
func serve(t testing.TB, b *eventbus.Bus, o turns.HandlerOptions) (*turns.Handler, *httptest.Server) {
	t.Helper()
	h, err := turns.NewHandler(b, o)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(turns.CancelPattern, h.Cancel())
	mux.Handle(turns.TurnPattern, h.Turn())
	mux.Handle(turns.PresencePattern, h.Presence())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv
}

// answer is an HTTP answer read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// code returns the JSON error answer's code and message.
func (a answer) code(t testing.TB) (string, string) {
	t.Helper()
	var e struct{ Code, Message string }
	require.NoError(t, json.Unmarshal([]byte(a.body), &e), "body %q", a.body)
	return e.Code, e.Message
}

func do(t testing.TB, method, url string, body string, header http.Header) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// types lists the types of every event in session's log.
func types(t testing.TB, b *eventbus.Bus, session string) []string {
	t.Helper()
	sub, err := b.Subscribe(context.Background(), session, eventbus.SubscribeOptions{RequireSession: true})
	require.NoError(t, err)
	defer sub.Close()
	var out []string
	for {
		ev, ok := sub.TryNext()
		if !ok {
			return out
		}
		out = append(out, ev.Type)
	}
}
